#include "cli/command_setup.hpp"

#include "plugins/plugin_discovery.hpp"
#include "recipe/recipe_validator.hpp"

namespace privdiff::core::cli {

void load_plugins(ComponentRegistry& registry, const GlobalOptions& global, const RecipeDocument* recipe) {
  for (const auto& dir : global.plugin_paths) registry.add_directory(dir);
  for (const auto& dir : plugin_path_from_environment()) registry.add_directory(dir);
  if (recipe) {
    for (const auto& dir : recipe_plugin_directories(*recipe)) registry.add_directory(dir);
  }
  registry.add_directory(default_plugin_directory());
}

Recipe load_recipe(const std::string& file, const std::vector<std::string>& overrides, const GlobalOptions& global,
                   ComponentRegistry& registry) {
  return load_recipe(RecipeDocument::load(file), overrides, global, registry);
}

Recipe load_recipe(RecipeDocument document, const std::vector<std::string>& overrides, const GlobalOptions& global,
                   ComponentRegistry& registry) {
  std::vector<Diagnostic> override_errors = document.apply_overrides(overrides);
  load_plugins(registry, global, &document);
  return validate_recipe(document, registry, std::move(override_errors));
}

}  // namespace privdiff::core::cli
