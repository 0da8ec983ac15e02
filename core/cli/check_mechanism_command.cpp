// privdiff check-mechanism RECIPE: runs the recipe's private stage's own mechanism code (whatever
// plugin it comes from) through the record-replay sensitivity check, the noise check and the
// one-run gradient-canary audit (sdk audit/mechanism_check.hpp); a stage that releases noisy
// statistics instead of DP-SGD updates through their record replay and noise check
// (run/statistic_stage_check.hpp); exit 1 on a violation.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "run/check_models.hpp"
#include "run/stage_under_test.hpp"
#include "run/statistic_stage_check.hpp"

#include <privdiff/audit/mechanism_check.hpp>
#include <privdiff/components/accountant.hpp>

#include <iostream>
#include <memory>

namespace privdiff::core::cli {

namespace {

struct CheckMechanismArgs {
  std::string recipe;
  std::vector<std::string> overrides;
  std::string stage;
  std::int64_t replays = 40, canaries = 5000, seed = 0;
  bool no_audit = false, stand_in_only = false;
};

// (c)'s accountant and target: the recipe's [privacy] accountant, epsilon and delta (null when it
// has no epsilon and delta: the audit is then skipped).
std::unique_ptr<sdk::Accountant> recipe_accountant(const Recipe& recipe, const ComponentRegistry& registry,
                                                   sdk::audit::MechanismCheckOptions& options) {
  if (!recipe.privacy.has("epsilon") || !recipe.privacy.has("delta")) return nullptr;
  const std::string id = recipe.privacy.get_string("accountant");
  auto accountant = create_component<sdk::Accountant>(registry, id, recipe.accountants.at(id));
  options.target_epsilon = recipe.privacy.get_double("epsilon");
  options.delta = recipe.privacy.get_double("delta");
  return accountant;
}

// A stage that releases statistics: their replay, its findings, the verdict.
int check_statistics(const Recipe& recipe, const ComponentRegistry& registry, const StageUnderTest& stage,
                     std::int64_t seed) {
  std::cout << "checking stage '" << stage.name << "': mechanism " << stage.mechanism << " from " << stage.plugin
            << ", which releases noisy statistics (its own code, the recipe's model and public data, stand-in "
            << "private records)\n";
  const sdk::check::Report report =
      check_statistic_stage(recipe, registry, stage.index, static_cast<std::uint64_t>(seed), std::cout);
  std::cout << report.describe()
            << (report.violations.empty() ? "PASSED: every released statistic kept its declared sensitivity and noise\n"
                                          : "FAILED\n");
  return report.violations.empty() ? exit_ok : exit_failure;
}

// (a) and (b) on the recipe's model too: its records, its public data as is.
void on_recipe_model(const CheckModels& models, sdk::audit::MechanismCheckOptions& options) {
  options.model_replay.model = models.recipe_model;
  options.model_replay.shape = models.image_shape;
  options.model_replay.data_seed = options.replay.data_seed;
  options.model_replay.x_alone_in_chunk = 3;  // a diffusion loss draws its noise per chunk
  options.model_replay.physical_batch_sizes = {3};
  options.model_replay.steps = {1};
  options.model_replay.label = ", the recipe's model";
  // A real model's steps cost ~1000 times the stand-in's: the first step and its next steps, in
  // chunks, with the extreme records and one typical one, on a smaller D.
  options.model_replay.random_neighbours = 1;
  options.model_replay.large_clip_factor = 0;
  options.model_replay.records = 12;
  options.model_replay.batch_size = 4;
  // (b): 10 replays are d_j x 9 degrees of freedom per tensor, 72 for the smallest (an 8-channel norm).
  options.model_noise.model = models.recipe_model;
  options.model_noise.shape = models.image_shape;
  options.model_noise.public_data = models.public_data.get();
  options.model_noise.replays = 10;
  options.model_noise.records = 6;  // two chunks of 3
  options.model_noise.seed = options.noise.seed + 1000000;
  options.model_noise.label = ", the recipe's model";
}

// The models and public data of (a), (b) and (c); says what runs where.
void use_models(const CheckModels& models, const StageUnderTest& stage, bool stand_in_only,
                sdk::audit::MechanismCheckOptions& options) {
  options.replay.model.public_data = models.stand_in_public.get();
  options.noise.public_data = models.stand_in_public.get();
  options.canaries.public_data = models.public_data.get();
  std::cout << "checking stage '" << stage.name << "': mechanism " << stage.mechanism << " from " << stage.plugin
            << ", C " << stage.max_grad_norm << ": its own code on a stand-in model of conv, group-norm and linear "
            << "layers (a, b, c)";
  if (models.recipe_model.make && !stand_in_only) {
    on_recipe_model(models, options);
    std::cout << " and on the recipe's model (a, b" << (models.text ? "; a record there is an image and its caption, "
                                                                        "and x's caption alone is audited too"
                                                                      : "")
              << ")";
  }
  if (models.public_name) std::cout << ", with public data '" << *models.public_name << "'";
  std::cout << "\n";
}

}  // namespace

CLI::App* add_check_mechanism_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "check-mechanism",
      "Check the recipe's private mechanism's own code (any plugin): per-record sensitivity by record replay, the "
      "noise against what its ledger states, and a one-run canary audit; for a stage that releases noisy statistics "
      "(a query's histogram), their record replay and noise (exit 1 on a violation)");
  auto args = std::make_shared<CheckMechanismArgs>();
  cmd->add_option("RECIPE", args->recipe, "recipe file (.toml) with a private stage")->required();
  cmd->add_option("--set", args->overrides, "override a recipe key (repeatable)")->allow_extra_args(false);
  cmd->add_option("--stage", args->stage, "the stage to check (default: the recipe's only private stage)");
  cmd->add_option("--replays", args->replays, "runs of the noise check of a DP-SGD stage (default 40)")->check(at_least(2));
  cmd->add_option("--canaries", args->canaries, "canaries of the one-run audit of a DP-SGD stage (default 5000)")->check(at_least(2));
  cmd->add_option("--seed", args->seed, "the checks' data and noise seeds (default 0; runs with other seeds are "
                                        "independent tries)")->check(at_least(0));
  cmd->add_flag("--no-audit", args->no_audit, "skip the one-run canary audit");
  cmd->add_flag("--stand-in-only", args->stand_in_only,
                "record replay and noise check on the stand-in model only (not also on the recipe's model, the slower part)");
  cmd->callback([&global, &exit_code, args] {
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(args->recipe, args->overrides, global, registry);
    const StageUnderTest stage = stage_under_test(recipe, registry, args->stage, args->recipe, "check", true);
    if (stage.releases_statistics) {
      exit_code = check_statistics(recipe, registry, stage, args->seed);
      return;
    }
    sdk::audit::MechanismCheckOptions options;
    options.max_grad_norm = stage.max_grad_norm;
    options.noise.replays = args->replays;
    options.noise.seed = 1 + static_cast<std::uint64_t>(args->seed) * static_cast<std::uint64_t>(args->replays);
    options.replay.data_seed = 7 + static_cast<std::uint64_t>(args->seed);
    options.canaries.seed = static_cast<std::uint64_t>(args->seed);
    options.canaries.canaries = args->canaries;
    const auto accountant = args->no_audit ? nullptr : recipe_accountant(recipe, registry, options);
    options.accountant = accountant.get();
    const CheckModels models = check_models(recipe, registry, stage, static_cast<std::uint64_t>(args->seed) + 1);
    use_models(models, stage, args->stand_in_only, options);
    const sdk::audit::MechanismCheck result = sdk::audit::check_mechanism(stage.make, options);
    std::cout << result.describe();
    exit_code = result.passed() ? exit_ok : exit_failure;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
