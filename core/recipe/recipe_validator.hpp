#pragma once
// Validates a recipe document against the host's section schemas and the schemas of the
// components it names, reporting every error at once.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"
#include "recipe/recipe_document.hpp"

#include <filesystem>
#include <vector>

namespace privdiff::core {

/// The recipe's [plugins] search directories (absolute), read leniently: they must be loaded
/// before the rest can be validated. Malformed entries are reported by validate_recipe.
std::vector<std::filesystem::path> recipe_plugin_directories(const RecipeDocument& document);

/// Checks the whole recipe and converts it to typed configs. Throws RecipeError listing every
/// problem (type mismatch, out of range, unknown key with suggestion, missing required key,
/// unknown component id with the available ones), in file order, followed by `earlier` problems
/// (e.g. overrides that could not be applied), which also make it throw.
Recipe validate_recipe(const RecipeDocument& document, const ComponentRegistry& registry,
                       std::vector<Diagnostic> earlier = {});

}  // namespace privdiff::core
