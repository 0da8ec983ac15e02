#include "cli/command_setup.hpp"

#include <filesystem>
#include <stdexcept>

namespace privdiff::core::cli {

void load_plugins(ComponentRegistry& registry, const GlobalOptions& global, const RecipeDocument* recipe) {
  core::load_plugins(registry, global.plugin_paths, recipe);
}

void load_plugins_of_runs(ComponentRegistry& registry, const GlobalOptions& global, const std::vector<std::string>& run_dirs) {
  load_plugins(registry, global, nullptr);
  for (const auto& dir : run_dirs) {
    const std::filesystem::path recipe = std::filesystem::path(dir) / "recipe.toml";
    if (!std::filesystem::is_regular_file(recipe)) continue;
    const RecipeDocument document = RecipeDocument::load(recipe);
    load_plugins(registry, global, &document);  // libraries already loaded are skipped
  }
}

std::shared_ptr<RecipeArguments> add_recipe_arguments(CLI::App& command, const std::string& set_example) {
  auto args = std::make_shared<RecipeArguments>();
  command.add_option("RECIPE", args->recipe, "recipe file (.toml)")->required();
  command.add_option("--set", args->overrides, "override a key, e.g. --set " + set_example + " (repeatable)")
      ->allow_extra_args(false);
  return args;
}

Recipe load_recipe(const std::string& file, const std::vector<std::string>& overrides, const GlobalOptions& global,
                   ComponentRegistry& registry) {
  return core::load_recipe(file, overrides, global.plugin_paths, registry);
}

Recipe load_recipe(RecipeDocument document, const std::vector<std::string>& overrides, const GlobalOptions& global,
                   ComponentRegistry& registry) {
  return core::load_recipe(std::move(document), overrides, global.plugin_paths, registry);
}

CLI::Validator at_least(long long minimum) {
  return CLI::Validator(
      [minimum](std::string& value) -> std::string {
        try {
          std::size_t used = 0;
          const long long v = std::stoll(value, &used);
          if (used == value.size() && v >= minimum) return "";
        } catch (const std::exception&) {
        }
        return "must be an integer >= " + std::to_string(minimum) + ", got " + value;
      },
      "INT >= " + std::to_string(minimum));
}

}  // namespace privdiff::core::cli
