// privdiff sweep RECIPE --param KEY=SPEC... --score METRIC [--candidates DIST ...] [--out DIR]
// privdiff sweep --resume DIR
// Parses, calls core/sweep (sweep_runner.hpp: the plan, the candidates, the release) and prints.
#include "cli/commands.hpp"
#include "sweep/sweep_runner.hpp"

#include <iostream>

namespace privdiff::core::cli {

namespace {

// A resumed sweep runs as it was planned: an option that would change the plan is refused, not ignored.
void refuse_plan_options_on_resume(const CLI::App& cmd) {
  for (const char* name : {"--param", "--score", "--minimize", "--candidates", "--eta", "--gamma", "--mu", "--count",
                           "--seed", "--set", "--out"}) {
    if (cmd.get_option(name)->count() > 0) {
      throw UsageError(std::string("sweep --resume continues the sweep as it was planned: ") + name + " cannot change "
                       "it (the candidates and their budget were fixed before the first ran); leave it out, or start "
                       "a new sweep");
    }
  }
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Tune hyperparameters with the privacy of the search accounted: the best of a random number of DP runs");
  auto a = std::make_shared<SweepRequest>();
  cmd->add_option("RECIPE", a->recipe, "the recipe to tune (its [privacy] epsilon is the whole sweep's target)");
  cmd->add_option("--param", a->params, "a searched key: KEY=V1,V2,... or KEY=log:LOW:HIGH[:int] (repeatable)");
  cmd->add_option("--score", a->score, "the [[eval]] metric that selects the best candidate");
  cmd->add_flag("--minimize", a->minimize, "the lowest score is the best (default: the highest)");
  cmd->add_option("--candidates", a->candidates, "how many candidates: truncated_negative_binomial (default), poisson, fixed")
      ->check(CLI::IsMember({"truncated_negative_binomial", "poisson", "fixed"}));
  cmd->add_option("--eta", a->eta, "truncated negative binomial: eta (default 1: geometric)");
  cmd->add_option("--gamma", a->gamma, "truncated negative binomial: gamma (default 0.25: E[K] = 4 at eta 1)");
  cmd->add_option("--mu", a->mu, "poisson: the mean number of candidates (default 4)");
  cmd->add_option("--count", a->count, "fixed: the number of candidates (default 4)");
  auto* seed = cmd->add_option("--seed", a->seed,
                               "seed of K and of the hyperparameter draws, for tests (default: the OS's secure "
                               "randomness, never kept: the theorem needs K secret)");
  cmd->add_option("--set", a->overrides, "override a key for every candidate (repeatable)");
  cmd->add_option("--out", a->out, "sweep directory (default sweeps/<recipe name>)");
  cmd->add_option("--resume", a->resume, "continue the sweep in this directory (nothing is drawn again)");
  auto* stop_after = cmd->add_option("--stop-after-candidates", a->stop_after,
                                     "stop (exit 3) after running N candidates (0: before the first); continue with --resume");
  cmd->callback([a, cmd, seed, stop_after, &global, &exit_code] {
    a->seeded = seed->count() > 0;
    for (const char* name : {"--score", "--minimize", "--candidates", "--eta", "--gamma", "--mu", "--count"}) {
      if (cmd->get_option(name)->count() > 0) a->given.insert(name);
    }
    if (a->resume.empty() == a->recipe.empty()) throw UsageError("sweep: give a RECIPE to start a sweep, or --resume DIR");
    if (stop_after->count() > 0 && a->stop_after < 0) {
      throw UsageError("sweep --stop-after-candidates: expected a count >= 0, got " + std::to_string(a->stop_after));
    }
    if (a->seeded && a->seed < 0) throw UsageError("sweep --seed: expected a seed >= 0, got " + std::to_string(a->seed));
    if (!a->resume.empty()) refuse_plan_options_on_resume(*cmd);
    const SweepResult r = run_sweep(*a, global.plugin_paths, std::cout);
    if (r.stopped) {
      if (a->stop_after >= 0 && r.ran == a->stop_after) std::cout << "sweep stopped after " << r.ran << " candidates; ";
      std::cout << "continue with: privdiff sweep --resume " << r.dir.string() << "\n";
      exit_code = exit_stopped;
      return;
    }
    const SweepState& s = r.state;
    std::cout << "sweep: epsilon " << s.epsilon << " at delta " << s.delta << " for the whole search (target "
              << s.target_epsilon << "); released: " << (r.dir / "privacy.json").string()
              << (s.selected ? " and " + (r.dir / "selected").string() : std::string()) << "\n";
    exit_code = exit_ok;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
