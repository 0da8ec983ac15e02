#pragma once
// What made a run, for its summary.json: the privdiff version and build fingerprint, the command
// line, and every component the recipe uses with the plugin library and version that provided it.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace privdiff::core {

nlohmann::json run_provenance(const Recipe& recipe, const ComponentRegistry& registry, const std::string& command_line);

}  // namespace privdiff::core
