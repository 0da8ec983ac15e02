// privdiff audit RECIPE: a white-box gradient-canary audit of the recipe's private stage
// (audit/gradient_canaries.hpp). The stage's own mechanism, whatever plugin it comes from, with the
// recipe's settings (K, C, clip rule and mode, physical batch size) trains a canary model on the
// audit's own schedule (q, steps) with the noise calibrated to the recipe's epsilon by its
// accountant; the empirical lower bound eps_lower (Steinke et al. 2023, one run) must not exceed
// the reported epsilon.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "recipe/reproducible_noise.hpp"
#include "recipe/suggest.hpp"
#include "util/atomic_file.hpp"
#include "run/check_models.hpp"
#include "run/stage_under_test.hpp"

#include <privdiff/audit/gradient_canaries.hpp>
#include <privdiff/components/auditor.hpp>
#include <privdiff/components/accountant.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace privdiff::core::cli {

namespace {

struct Args {
  std::string recipe;
  std::vector<std::string> overrides;
  std::string stage;
  std::int64_t canaries = 5000, fillers = 1000, steps = 4;
  double canary_norm = 10.0, sampling_rate = 1.0, confidence = 0.95;
  std::int64_t seed = 0;
  std::string out;
  std::string auditor = "one_run";
};

// The audit run's settings: "auto" sigma, the audit's steps, the recipe's chunks, and its noise
// source (seeded by the stage's or the run's seed when the recipe opts into reproducible noise).
sdk::check::MechanismSettings audit_settings(const Recipe& recipe, const StageUnderTest& stage, std::int64_t steps) {
  const sdk::Config& config = recipe.stages[stage.index].mechanism.config;
  sdk::check::MechanismSettings settings;
  settings.steps = steps;
  settings.physical_batch_size = config.get_int("physical_batch_size");
  if (draws_reproducible_noise(recipe.stages[stage.index])) {
    settings.seed = static_cast<std::uint64_t>(config.has("seed") ? config.get_int("seed") : recipe.run.get_int("seed"));
  }
  return settings;
}

// "K 4, C 1, flat clipping, physical batch 200, seeded noise": the stage's engine settings.
std::string describe_settings(const sdk::Config& config) {
  std::ostringstream s;
  const std::int64_t physical = config.get_int("physical_batch_size");
  s << "K " << (config.has("noise_multiplicity") ? config.get_int("noise_multiplicity") : 1) << ", C "
    << config.get_double("max_grad_norm") << ", " << (config.has("clipping") ? config.get_string("clipping") : "own")
    << " clipping, physical batch "
    << (physical > 0 ? std::to_string(physical) : "all") << ", "
    << (config.get_bool("secure_noise") ? "secure" : "seeded") << " noise";
  return s.str();
}

void write_outputs(const std::filesystem::path& dir, const sdk::audit::GradientCanaryAudit& r, const Args& args,
                   const std::string& stage, const std::string& accountant) {
  std::filesystem::create_directories(dir);
  std::ostringstream csv;
  csv << "canary,included,score\n" << std::setprecision(17);
  for (std::size_t i = 0; i < r.scores.size(); ++i) csv << i << "," << (r.included[i] ? 1 : 0) << "," << r.scores[i] << "\n";
  write_file_atomically(dir / "scores.csv", csv.str());
  const nlohmann::json j = {
      {"recipe", args.recipe},
      {"stage", stage},
      {"audit", "gradient canaries, one run"},
      {"auditor", args.auditor},
      {"canaries", r.bound.canaries},
      {"fillers", args.fillers},
      {"canary_norm", args.canary_norm},
      {"sampling_rate", args.sampling_rate},
      {"steps", r.steps},
      {"dataset_size", r.dataset_size},
      {"noise_multiplier", r.noise_multiplier},
      {"accountant", accountant},
      {"delta", r.delta},
      {"reported_epsilon", r.reported_epsilon},
      {"epsilon_lower", r.bound.epsilon_lower},
      {"confidence", r.bound.confidence},
      {"guesses", r.bound.guesses},
      {"correct", r.bound.correct},
      {"passed", r.passed()}};
  write_file_atomically(dir / "audit.json", j.dump(2) + "\n");
}

}  // namespace

CLI::App* add_audit_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "audit", "Audit the recipe's private training engine with gradient canaries: an empirical lower bound on "
               "epsilon from one run, beside the accountant's epsilon (exit 1 when it exceeds it)");
  auto args = std::make_shared<Args>();
  cmd->add_option("RECIPE", args->recipe, "recipe file (.toml) with one private DP-SGD stage")->required();
  cmd->add_option("--set", args->overrides, "override a recipe key (repeatable)")->allow_extra_args(false);
  cmd->add_option("--stage", args->stage, "the stage to audit (default: the recipe's only private DP-SGD stage)");
  cmd->add_option("--canaries", args->canaries, "m: canaries, each in the data with probability 1/2 (default 5000)")
      ->check(at_least(2));
  cmd->add_option("--fillers", args->fillers, "ordinary examples beside the canaries (default 1000)")->check(at_least(0));
  cmd->add_option("--steps", args->steps, "logical steps of the audit run (default 4)")->check(at_least(1));
  cmd->add_option("--sampling-rate", args->sampling_rate, "q of the audit run (default 1: strongest)")
      ->check(CLI::Range(1e-6, 1.0));
  cmd->add_option("--canary-norm", args->canary_norm, "canary gradient norm in units of C (default 10: a mechanism that does not clip stands out)")
      ->check(CLI::Range(1e-3, 1e6));
  cmd->add_option("--confidence", args->confidence, "of the lower bound (default 0.95)")->check(CLI::Range(0.5, 0.9999));
  cmd->add_option("--seed", args->seed, "canary placement and inclusion (default 0)")->check(at_least(0));
  cmd->add_option("--auditor", args->auditor, "the auditor plugin that turns scores into a bound (default one_run)");
  cmd->add_option("--out", args->out, "write audit.json and scores.csv (per canary: included, score) here");
  cmd->callback([&global, &exit_code, args] {
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(args->recipe, args->overrides, global, registry);
    if (!recipe.privacy.has("epsilon") || !recipe.privacy.has("delta")) {
      throw UsageError(args->recipe + ": [privacy] needs epsilon and delta: the audit calibrates to them");
    }
    auto found = registry.find(sdk::ComponentKind::auditor, args->auditor);
    if (!found) {
      const auto available = registry.ids(sdk::ComponentKind::auditor);
      throw UsageError("--auditor: unknown auditor '" + args->auditor + "'" + did_you_mean(args->auditor, available) +
                       "; available auditors: " + join(available));
    }
    const auto auditor = create_component<sdk::Auditor>(
        registry, args->auditor, sdk::make_config(found->registration->schema, "auditor", {}));
    const StageUnderTest stage = stage_under_test(recipe, registry, args->stage, args->recipe, "audit");
    const std::string accountant_id = recipe.privacy.get_string("accountant");
    const auto accountant = create_component<sdk::Accountant>(registry, accountant_id, recipe.accountants.at(accountant_id));
    const double epsilon = recipe.privacy.get_double("epsilon"), delta = recipe.privacy.get_double("delta");
    sdk::audit::GradientCanaryOptions audit;
    audit.canaries = args->canaries;
    audit.fillers = args->fillers;
    audit.canary_norm = args->canary_norm;
    audit.sampling_rate = args->sampling_rate;
    audit.seed = static_cast<std::uint64_t>(args->seed);
    audit.confidence = args->confidence;
    const MechanismPublicData public_data = mechanism_public_data(recipe, registry, stage);
    audit.public_data = public_data.data.get();
    const sdk::check::MechanismSettings settings = audit_settings(recipe, stage, args->steps);
    std::cout << "auditing stage '" << stage.name << "' (" << stage.mechanism << " from " << stage.plugin
              << ", its own code: " << describe_settings(recipe.stages[stage.index].mechanism.config)
              << (public_data.name ? ", public data '" + *public_data.name + "' on the fillers' coordinates" : "") << ")\n"
              << "  " << audit.canaries << " gradient canaries (norm " << audit.canary_norm << " C, each in the data with "
              << "probability 1/2), " << audit.fillers << " fillers, q " << audit.sampling_rate << ", " << args->steps
              << " steps, noise calibrated to epsilon " << epsilon << " (" << accountant_id << ", delta " << delta << ")\n";
    const auto r = sdk::audit::audit_with_gradient_canaries(stage.make, settings, stage.max_grad_norm, *accountant, epsilon,
                                                            delta, audit, auditor.get());
    std::cout << "  noise multiplier " << r.noise_multiplier << ", dataset " << r.dataset_size << " examples, "
              << r.steps << " steps\n"
              << "  guesses " << r.bound.guesses << ", correct " << r.bound.correct << "\n"
              << "epsilon lower bound " << std::setprecision(4) << r.bound.epsilon_lower << " ("
              << r.bound.confidence * 100 << "% confidence)  vs  reported epsilon " << r.reported_epsilon << " ("
              << accountant_id << ")\n"
              << (r.passed() ? "audit passed: the lower bound does not exceed the reported epsilon\n"
                             : "AUDIT FAILED: the run leaks more than its reported epsilon allows\n");
    if (!args->out.empty()) {
      write_outputs(args->out, r, *args, stage.name, accountant_id);
      std::cout << "scores: " << (std::filesystem::path(args->out) / "scores.csv").string() << "\n";
    }
    exit_code = r.passed() ? exit_ok : exit_failure;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
