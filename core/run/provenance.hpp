#pragma once
// What made a run, for its summary.json: the privdiff version and build fingerprint, the command
// line, and every component the recipe uses with the plugin library (path, SHA-256) and version that
// provided it. The libraries are also what a checkpoint and a sweep's plan record, so that a resume
// runs the code that was started (loader/component_library.hpp).

#include "loader/component_library.hpp"
#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

/// Every component the recipe uses, (kind, id), without repeats: model, adapter, mechanisms, sampler,
/// accountants, datasets and evaluators.
std::vector<std::pair<sdk::ComponentKind, std::string>> recipe_components(const Recipe& recipe);

/// The library of each of recipe_components(recipe). Throws std::runtime_error naming a library file
/// that cannot be read.
std::vector<ComponentLibrary> recipe_component_libraries(const Recipe& recipe, const ComponentRegistry& registry);

nlohmann::json run_provenance(const Recipe& recipe, const ComponentRegistry& registry, const std::string& command_line);

}  // namespace privdiff::core
