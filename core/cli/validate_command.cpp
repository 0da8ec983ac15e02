// privdiff validate RECIPE [--set key=value]...
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "data/open_dataset.hpp"
#include "recipe/suggest.hpp"
#include "run/composed_run.hpp"
#include "run/run_orchestrator.hpp"
#include "sweep/sweep_runner.hpp"

#include <privdiff/engine/device.hpp>

#include <iostream>

namespace privdiff::core::cli {

CLI::App* add_validate_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* validate = app.add_subcommand(
      "validate", "Check a recipe: the installed plugins' schemas, then every check run makes before training "
                  "(data, privacy plan, batch sizes), and a [sweep] table as privdiff sweep checks it");
  const auto args = add_recipe_arguments(*validate, "stage.0.epochs=3");
  validate->callback([&global, &exit_code, args] {
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(args->recipe, args->overrides, global, registry);
    try {  // the device run would train on exists here (a CPU build, or no visible GPU, has no "cuda")
      (void)sdk::engine::resolve_device(recipe.run.get_string("device"));
    } catch (const sdk::engine::DeviceUnavailable& e) {
      throw RecipeError({recipe.diagnostic("run.device", e.what())});
    }
    // Every check `run` makes before training: the data, the privacy plan, batch sizes.
    RunOrchestrator orchestrator(recipe, compose_for_command(recipe, registry, args->recipe),
                                 [&registry](const DataSection& data) { return open_dataset(data, registry); });
    orchestrator.open_earlier_runs_with(earlier_run_data(registry));
    try {
      orchestrator.check(std::cout);
    } catch (const RunRefused& refused) {
      throw UsageError(args->recipe + ": " + refused.what());
    }
    // A [sweep] table: everything `privdiff sweep` checks before it draws K and anything spends.
    if (recipe.sweep) check_recipe_sweep(args->recipe, args->overrides, global.plugin_paths, std::cout);
    std::vector<std::string> stages;
    for (const auto& s : recipe.stages) stages.push_back(s.name + " (" + s.mechanism.id + ")");
    std::cout << args->recipe << ": valid\n"
              << "  model:       " << (recipe.model ? recipe.model->id : "none") << "\n"
              << "  stages:      " << join(stages) << "\n"
              << "  sampler:     " << (recipe.sampler ? recipe.sampler->id : "none") << "\n"
              << "  accountants: " << join(recipe.accountant_ids) << "\n";
    exit_code = exit_ok;
  });
  return validate;
}

}  // namespace privdiff::core::cli
