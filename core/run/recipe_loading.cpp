#include "run/recipe_loading.hpp"

#include "data/open_dataset.hpp"
#include "loader/plugin_discovery.hpp"
#include "recipe/recipe_validator.hpp"
#include "util/usage_error.hpp"

#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <stdexcept>

namespace privdiff::core {

namespace {

// Each library whose component id another library also registers, on stderr: once a process (the
// sweep loads its recipe many times).
void say_duplicates(const ComponentRegistry& registry) {
  static std::mutex said_mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(said_mutex);
  for (const auto& line : registry.duplicate_notices()) {
    if (said.insert(line).second) std::cerr << line << "\n";
  }
}

}  // namespace

void load_plugins(ComponentRegistry& registry, const std::vector<std::string>& plugin_paths, const RecipeDocument* recipe) {
  for (const auto& dir : plugin_paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      throw UsageError("--plugin-path " + dir + ": " + (std::filesystem::exists(dir, ec) ? "not a directory" : "no such directory"));
    }
    registry.add_directory(dir);
  }
  for (const auto& dir : plugin_path_from_environment()) registry.add_directory(dir);
  if (recipe) {
    for (const auto& dir : recipe_plugin_directories(*recipe)) registry.add_directory(dir);
  }
  registry.add_directory(default_plugin_directory());
  if (recipe) {
    for (const auto& library : recipe_plugin_libraries(*recipe)) {
      const LoadedPlugin& chosen = registry.choose_library(library);
      if (!chosen.loaded) {
        throw UsageError(recipe->file() + ": [plugins] use: " + chosen.path.string() + ": " + chosen.refusal);
      }
    }
  }
  say_duplicates(registry);
}

Recipe load_recipe(const std::string& file, const std::vector<std::string>& overrides, const std::vector<std::string>& plugin_paths, ComponentRegistry& registry) {
  return load_recipe(RecipeDocument::load(file), overrides, plugin_paths, registry);
}

Recipe load_recipe(RecipeDocument document, const std::vector<std::string>& overrides,
                   const std::vector<std::string>& plugin_paths, ComponentRegistry& registry) {
  std::vector<Diagnostic> override_errors = document.apply_overrides(overrides);
  load_plugins(registry, plugin_paths, &document);
  return validate_recipe(document, registry, std::move(override_errors));
}

ComposedRun compose_for_command(const Recipe& recipe, const ComponentRegistry& registry, const std::string& file) {
  try {
    return compose(recipe, registry);
  } catch (const RecipeError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw UsageError(file + ": " + e.what());
  }
}

RunDataOpener earlier_run_data(const ComponentRegistry& registry) {
  return [&registry](const std::filesystem::path& run_dir) {
    const std::filesystem::path file = run_dir / "recipe.toml";
    if (!std::filesystem::is_regular_file(file)) throw std::runtime_error("it keeps no recipe.toml");
    std::vector<std::unique_ptr<sdk::Dataset>> out;
    try {
      const Recipe recipe = validate_recipe(RecipeDocument::load(file.string()), registry);
      for (const auto& section : recipe.datasets) out.push_back(open_dataset(section, registry));
    } catch (const std::exception& e) {
      throw std::runtime_error("its data cannot be opened: " + std::string(e.what()));
    }
    return out;
  };
}

RunFiles run_files(const std::string& source, const std::string& command) {
  namespace fs = std::filesystem;
  RunFiles files;
  files.checkpoint = fs::is_directory(source) ? fs::path(source) / "checkpoint.pt" : fs::path(source);
  files.run_dir = files.checkpoint.parent_path().empty() ? fs::path(".") : files.checkpoint.parent_path();
  files.recipe = files.run_dir / "recipe.toml";
  if (!fs::is_regular_file(files.checkpoint)) {
    throw UsageError(command + ": no checkpoint at " + files.checkpoint.string() +
                     " (give a run directory or its checkpoint.pt)");
  }
  if (!fs::is_regular_file(files.recipe)) {
    throw UsageError(command + ": no recipe.toml beside " + files.checkpoint.string() +
                     " (the run's recipe says which model it is)");
  }
  return files;
}

}  // namespace privdiff::core
