#pragma once
// What several commands do first: load plugins from every search location, and load, override
// and validate a recipe.

#include "cli/commands.hpp"
#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"
#include "recipe/recipe_document.hpp"
#include "run/recipe_loading.hpp"
#include "run/run_orchestrator.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::core::cli {

/// The RECIPE argument and --set overrides of a command that reads one recipe.
struct RecipeArguments {
  std::string recipe;
  std::vector<std::string> overrides;
};

/// Declares RECIPE (required) and --set (repeatable) on `command`; `set_example` is the override
/// its help shows, e.g. "stage.0.epochs=3". The parsed values land in the returned object, which
/// the command's callback keeps alive by holding the pointer.
std::shared_ptr<RecipeArguments> add_recipe_arguments(CLI::App& command, const std::string& set_example);

/// Loads plugins from: --plugin-path dirs, $PRIVDIFF_PLUGIN_PATH, the recipe's [plugins] search
/// (when a recipe is given), then the plugins installed next to the executable.
void load_plugins(ComponentRegistry& registry, const GlobalOptions& global, const RecipeDocument* recipe);
/// The same for commands that read finished runs (account, compare): each run directory's
/// recipe.toml adds its [plugins] search, so an out-of-tree accountant the run used is found.
void load_plugins_of_runs(ComponentRegistry& registry, const GlobalOptions& global, const std::vector<std::string>& run_dirs);

/// Parses `file`, applies `overrides`, loads plugins and validates. Throws RecipeError with
/// every problem found, override errors included.
Recipe load_recipe(const std::string& file, const std::vector<std::string>& overrides, const GlobalOptions& global,
                   ComponentRegistry& registry);
/// The same for a document already loaded (and perhaps edited).
Recipe load_recipe(RecipeDocument document, const std::vector<std::string>& overrides, const GlobalOptions& global,
                   ComponentRegistry& registry);

}  // namespace privdiff::core::cli
