// privdiff run RECIPE [--set key=value]... [--out DIR] [--stop-after-steps N]
// privdiff run --resume DIR [--stop-after-steps N]
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "data/open_dataset.hpp"
#include "run/provenance.hpp"
#include "run/run_orchestrator.hpp"

#include <atomic>
#include <csignal>
#include <iostream>

namespace privdiff::core::cli {

namespace {

std::atomic<bool> stop_signal{false};

extern "C" void request_stop(int) {
  stop_signal = true;
  // A second Ctrl-C stops at once (the default action).
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* run = app.add_subcommand("run", "Run a recipe: train its stages, account for privacy, write a run directory");
  struct Args {
    std::string recipe;
    std::vector<std::string> overrides;
    std::string out;
    std::string resume;
    std::int64_t stop_after = 0;
  };
  auto args = std::make_shared<Args>();
  run->add_option("RECIPE", args->recipe, "recipe file (.toml)");
  run->add_option("--set", args->overrides, "override a key, e.g. --set stage.0.epochs=3 (repeatable)")
      ->allow_extra_args(false);
  run->add_option("--out", args->out, "run directory (default: runs/<run.name>); must not exist or be empty");
  run->add_option("--resume", args->resume,
                  "continue the interrupted run in this directory from its checkpoint.pt, with its recipe.toml");
  run->add_option("--stop-after-steps", args->stop_after,
                  "checkpoint and stop (exit code 3) after N logical steps; continue later with --resume")
      ->check(at_least(1));
  run->footer("Ctrl-C (or SIGTERM) stops at the end of the current step, after writing a checkpoint; a second one "
              "stops at once.");
  run->callback([&global, &exit_code, args] {
    const bool resume = !args->resume.empty();
    if (resume == !args->recipe.empty()) {
      throw UsageError("run: give a RECIPE to start a run, or --resume RUN_DIR to continue one (not both)");
    }
    if (resume && (!args->overrides.empty() || !args->out.empty())) {
      throw UsageError("run --resume: --set and --out do not apply; a run resumes with its own recipe.toml");
    }
    const std::string recipe_file = resume ? (std::filesystem::path(args->resume) / "recipe.toml").string() : args->recipe;
    if (resume && !std::filesystem::is_regular_file(recipe_file)) {
      throw UsageError("run --resume " + args->resume + ": no recipe.toml there; is it a privdiff run directory? (A "
                       "run killed before writing it spent nothing: start it again with privdiff run RECIPE --out " +
                       args->resume + ")");
    }
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(recipe_file, args->overrides, global, registry);
    const std::filesystem::path run_dir =
        resume ? std::filesystem::path(args->resume)
               : args->out.empty() ? std::filesystem::path("runs") / recipe.run.get_string("name")
                                   : std::filesystem::path(args->out);
    RunOrchestrator orchestrator(recipe, compose(recipe, registry),
                                 [&registry](const DataSection& data) { return open_dataset(data, registry); });
    RunOptions options;
    options.resume = resume;
    options.stop_after_steps = args->stop_after;
    options.provenance = run_provenance(recipe, registry, global.command_line);
    options.stop_requested = [] { return stop_signal.load(); };
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
    try {
      const RunSummary summary = orchestrator.run(run_dir, std::cout, options);
      std::cout << "run directory: " << summary.run_dir.string() << "\n";
      exit_code = exit_ok;
    } catch (const RunRefused& refused) {
      throw UsageError(refused.what());  // exit code 2: nothing was written
    } catch (const RunStopped& stopped) {
      std::cout << stopped.what() << "\ncontinue with: privdiff run --resume " << run_dir.string() << "\n";
      exit_code = exit_stopped;
    }
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  });
  return run;
}

}  // namespace privdiff::core::cli
