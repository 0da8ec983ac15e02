#pragma once
// What every command and the sweep do first: load plugins from every search location, load, override
// and validate a recipe, compose its components, find a trained run's files.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"
#include "recipe/recipe_document.hpp"
#include "run/composed_run.hpp"
#include "run/run_orchestrator.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::core {

/// Loads plugins from: `plugin_paths` (--plugin-path; throws UsageError for one that is not a
/// directory), $PRIVDIFF_PLUGIN_PATH, the recipe's [plugins] search (when a recipe is given), then the
/// plugins installed next to the executable.
void load_plugins(ComponentRegistry& registry, const std::vector<std::string>& plugin_paths, const RecipeDocument* recipe);

/// Parses `file`, applies `overrides`, loads plugins and validates. Throws RecipeError with every
/// problem found, override errors included.
Recipe load_recipe(const std::string& file, const std::vector<std::string>& overrides,
                   const std::vector<std::string>& plugin_paths, ComponentRegistry& registry);
/// The same for a document already loaded (and perhaps edited).
Recipe load_recipe(RecipeDocument document, const std::vector<std::string>& overrides,
                   const std::vector<std::string>& plugin_paths, ComponentRegistry& registry);

/// compose() for a command: a component refusing its section (e.g. [eval.inception] weights) is input
/// the user can fix (UsageError naming `file`); recipe errors keep their own form.
ComposedRun compose_for_command(const Recipe& recipe, const ComponentRegistry& registry, const std::string& file);

/// Where a trained run's files are, from RUN_DIR or its checkpoint file: the checkpoint, the run
/// directory and the recipe.toml beside it. Throws UsageError, prefixed with `command`, when either
/// file is missing.
struct RunFiles {
  std::filesystem::path checkpoint, run_dir, recipe;
};
RunFiles run_files(const std::string& source, const std::string& command);

/// Opens the datasets an earlier run recorded in its recipe.toml, with the plugins already loaded
/// (RunOrchestrator::open_earlier_runs_with). `registry` must outlive the opener.
RunDataOpener earlier_run_data(const ComponentRegistry& registry);

}  // namespace privdiff::core
