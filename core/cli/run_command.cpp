// privdiff run RECIPE [--set key=value]... [--out DIR] [--stop-after-steps N] [--nproc N]
// privdiff run --resume DIR [--stop-after-steps N] [--nproc N]
// Under torchrun (RANK, WORLD_SIZE, ... set) each process is one rank of the run.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "data/open_dataset.hpp"
#include "parallel/local_launcher.hpp"
#include "parallel/process_group.hpp"
#include "run/provenance.hpp"
#include "run/run_orchestrator.hpp"

#include <privdiff/engine/device.hpp>

#include <atomic>
#include <csignal>
#include <iostream>

namespace privdiff::core::cli {

namespace {

std::atomic<bool> stop_signal{false};

extern "C" void request_stop(int) {
  stop_signal = true;
  // A second Ctrl-C stops at once (the default action). A second SIGTERM does not: a sweep or a
  // launcher may pass one on that the process group also delivered.
  std::signal(SIGINT, SIG_DFL);
}

// argv without `--nproc N` / `--nproc=N`: what each rank runs.
std::vector<std::string> without_nproc(const std::vector<std::string>& arguments) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == "--nproc") {
      ++i;
      continue;
    }
    if (arguments[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(arguments[i]);
  }
  return out;
}

// Joins this process to the run's other ranks when torchrun's variables say it is one of several.
std::unique_ptr<sdk::Collective> join_other_ranks(const std::optional<ProcessPlace>& place, const Recipe& recipe) {
  if (!place) return nullptr;  // WORLD_SIZE=1 too: a group of one (e.g. timing NCCL on one GPU)
  const c10::Device device = sdk::engine::resolve_device(recipe.run.get_string("device"));
  return connect_processes(*place, recipe.run.get_string("backend"), device,
                           std::chrono::seconds(recipe.run.get_int("collective_timeout")));
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
    int nproc = 1;
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
  run->add_option("--nproc", args->nproc,
                  "train as N processes on this machine (at most 256; data parallel, one run directory written by rank 0); for "
                  "several machines start privdiff under torchrun instead")
      ->check(CLI::Range(1, 256));
  run->footer("Ctrl-C (or SIGTERM) stops at the end of the current step, after writing a checkpoint; a second Ctrl-C "
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
    std::optional<ProcessPlace> place;
    try {
      place = process_place_from_environment();
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("run: ") + e.what());
    }
    if (args->nproc > 1 && place) {
      throw UsageError("run --nproc: WORLD_SIZE is set, so a launcher (torchrun) already started the ranks");
    }
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(recipe_file, args->overrides, global, registry);
    if (args->nproc > 1 || place) {
      try {  // a recipe the ranks cannot run is refused once, here, not by every rank
        choose_backend(recipe.run.get_string("backend"), sdk::engine::resolve_device(recipe.run.get_string("device")));
      } catch (const std::exception& e) {
        throw UsageError(recipe_file + ": " + e.what());
      }
    }
    if (args->nproc > 1) {
      exit_code = run_local_processes(args->nproc, without_nproc(global.arguments), std::cerr);
      return;
    }
    const std::filesystem::path run_dir =
        resume ? std::filesystem::path(args->resume)
               : args->out.empty() ? std::filesystem::path("runs") / recipe.run.get_string("name")
                                   : std::filesystem::path(args->out);
    RunOrchestrator orchestrator(recipe, compose_for_command(recipe, registry, recipe_file),
                                 [&registry](const DataSection& data) { return open_dataset(data, registry); });
    orchestrator.open_earlier_runs_with(earlier_run_data(registry));
    RunOptions options;
    options.resume = resume;
    options.stop_after_steps = args->stop_after;
    options.provenance = run_provenance(recipe, registry, global.command_line);
    options.libraries = recipe_component_libraries(recipe, registry);
    options.stop_requested = [] { return stop_signal.load(); };
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
    const std::unique_ptr<sdk::Collective> ranks = join_other_ranks(place, recipe);
    options.collective = ranks.get();
    if (place) options.local_processes = place->local_world_size;
    if (place) options.local_rank = place->local_rank;
    const bool reporter = !ranks || ranks->rank() == 0;  // rank 0 speaks for the run
    try {
      const RunSummary summary = orchestrator.run(run_dir, std::cout, options);
      if (reporter) std::cout << "run directory: " << summary.run_dir.string() << "\n";
      exit_code = exit_ok;
    } catch (const RunRefused& refused) {
      if (std::string(refused.what()).empty()) std::exit(exit_bad_input);  // another rank says why
      if (!reporter) throw UsageError("rank " + std::to_string(ranks->rank()) + ": " + refused.what());
      throw UsageError(refused.what());  // exit code 2: nothing was written
    } catch (const RunStopped& stopped) {
      if (reporter) std::cout << stopped.what() << "\ncontinue with: privdiff run --resume " << run_dir.string() << "\n";
      exit_code = exit_stopped;
    } catch (const std::exception& e) {
      if (!ranks || std::string(e.what()).rfind("rank ", 0) == 0) throw;
      throw std::runtime_error("rank " + std::to_string(ranks->rank()) + ": " + e.what());
    }
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  });
  return run;
}

}  // namespace privdiff::core::cli
