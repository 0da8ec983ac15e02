// privdiff params RECIPE [--set key=value]...: which parameters each stage trains, grouped by role
// and block (with DP-LDM's attention numbers), as the stage's parameter selection (train, train_roles,
// train_blocks, train_attention_from, train_pattern)
// and the recipe's [adapter] (e.g. LoRA) make them.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "run/composed_run.hpp"

#include <privdiff/engine/parameter_selection.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>

namespace privdiff::core::cli {

namespace {

struct Group {
  std::string role;
  int block;
  int attention;  ///< DP-LDM's number of an attention block (train_attention_from), 0 for none
  std::int64_t total = 0, trainable = 0;
  std::string module;  ///< the dotted name prefix its parameters share
  std::string first;   ///< the module of its first parameter
  std::string shown() const { return !module.empty() ? module : first + ", …"; }
};

// The longest dotted prefix `a` and `b` share ("unet.down0_res0" of two of its weights).
std::string common_module(const std::string& a, const std::string& b) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()) && a[i] == b[i]; ++i) {
    if (a[i] == '.') end = i;
  }
  return a.substr(0, end);
}

void print_stage(sdk::Model& model, std::ostream& out) {
  std::vector<Group> groups;
  std::int64_t total = 0, trainable = 0;
  const auto parameters = sdk::engine::parameters_with_roles(model);
  const auto numbers = sdk::engine::attention_numbers(parameters);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const sdk::ParameterInfo& p = parameters[i];
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.role == p.role && g.block == p.block_index; });
    if (it == groups.end()) {
      const std::string module = p.name.substr(0, p.name.rfind('.'));
      groups.push_back(Group{p.role, p.block_index, numbers[i], 0, 0, module, module});
      it = groups.end() - 1;
    } else {
      it->module = common_module(it->module + ".", p.name);
    }
    const std::int64_t n = p.parameter.numel();
    it->total += n;
    total += n;
    if (p.parameter.requires_grad()) {
      it->trainable += n;
      trainable += n;
    }
  }
  out << "  " << std::left << std::setw(16) << "role" << std::right << std::setw(6) << "block" << std::setw(6)
      << "attn" << std::setw(12) << "parameters" << std::setw(12) << "trainable" << "  module\n";
  for (const auto& g : groups) {
    out << "  " << std::left << std::setw(16) << g.role << std::right << std::setw(6)
        << (g.block < 0 ? std::string("-") : std::to_string(g.block)) << std::setw(6)
        << (g.attention == 0 ? std::string("-") : std::to_string(g.attention)) << std::setw(12) << g.total
        << std::setw(12) << g.trainable << "  " << g.shown() << "\n";
  }
  out << "  trainable " << trainable << " of " << total << " parameters\n";
}

}  // namespace

CLI::App* add_params_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* params = app.add_subcommand(
      "params", "Show the model's parameters by role and block, and which ones each stage trains (the rest stay "
                "frozen: no per-example gradients, bit-identical after the stage)");
  const auto args = add_recipe_arguments(*params, "stage.1.train=adapter");
  params->callback([&global, &exit_code, args] {
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(args->recipe, args->overrides, global, registry);
    ComposedRun run = compose(recipe, registry);
    if (!run.model) throw UsageError(args->recipe + ": the recipe has no [model]");
    std::cout << "model " << recipe.model->id << "\n";
    if (run.mechanisms.empty()) print_stage(*run.model, std::cout);
    for (std::size_t i = 0; i < run.mechanisms.size(); ++i) {
      const auto& config = recipe.stages[i].mechanism.config;
      std::cout << "\nstage[" << i << "] '" << recipe.stages[i].name << "' (" << recipe.stages[i].mechanism.id;
      if (config.has("train")) std::cout << ", train = \"" << config.get_string("train") << "\"";
      std::cout << ")\n";
      try {
        run.mechanisms[i]->select_trainable(*run.model);
      } catch (const std::invalid_argument& e) {
        throw UsageError(args->recipe + ": stage[" + std::to_string(i) + "] '" + recipe.stages[i].name + "': " + e.what());
      }
      print_stage(*run.model, std::cout);
    }
    exit_code = exit_ok;
  });
  return params;
}

}  // namespace privdiff::core::cli
