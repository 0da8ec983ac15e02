// privdiff run RECIPE [--set key=value]... [--out DIR]
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "data/open_dataset.hpp"
#include "run/run_orchestrator.hpp"

#include <iostream>

namespace privdiff::core::cli {

CLI::App* add_run_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* run = app.add_subcommand("run", "Run a recipe: train its stages, account for privacy, write a run directory");
  struct Args {
    std::string recipe;
    std::vector<std::string> overrides;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  run->add_option("RECIPE", args->recipe, "recipe file (.toml)")->required();
  run->add_option("--set", args->overrides, "override a key, e.g. --set stage.0.epochs=3 (repeatable)")
      ->allow_extra_args(false);
  run->add_option("--out", args->out, "run directory (default: runs/<run.name>); must not exist or be empty");
  run->callback([&global, &exit_code, args] {
    ComponentRegistry registry;
    const Recipe recipe = load_recipe(args->recipe, args->overrides, global, registry);
    const std::filesystem::path run_dir =
        args->out.empty() ? std::filesystem::path("runs") / recipe.run.get_string("name") : std::filesystem::path(args->out);
    RunOrchestrator orchestrator(recipe, compose(recipe, registry), open_dataset);
    const RunSummary summary = orchestrator.run(run_dir, std::cout);
    std::cout << "run directory: " << summary.run_dir.string() << "\n";
    exit_code = exit_ok;
  });
  return run;
}

}  // namespace privdiff::core::cli
