#pragma once
// Validates a recipe document against the host's section schemas and the schemas of the
// components it names, reporting every error at once.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"
#include "recipe/recipe_document.hpp"

#include <filesystem>
#include <optional>
#include <vector>

namespace privdiff::core {

/// The recipe's [plugins] search directories (absolute), read leniently: they must be loaded
/// before the rest can be validated. Malformed entries are reported by validate_recipe.
std::vector<std::filesystem::path> recipe_plugin_directories(const RecipeDocument& document);
/// The recipe's [plugins] use libraries (absolute), read the same way: loaded and chosen (see
/// ComponentRegistry::choose_library) before the rest is validated.
std::vector<std::filesystem::path> recipe_plugin_libraries(const RecipeDocument& document);

/// Checks the whole recipe and converts it to typed configs. Throws RecipeError listing every
/// problem (type mismatch, out of range, unknown key with suggestion, missing required key,
/// unknown component id with the available ones), in file order, followed by `earlier` problems
/// (e.g. overrides that could not be applied), which also make it throw.
Recipe validate_recipe(const RecipeDocument& document, const ComponentRegistry& registry,
                       std::vector<Diagnostic> earlier = {});

/// What `privdiff eval` scores with and against.
struct EvaluationChoice {
  std::vector<ComponentSection> evaluators;
  std::optional<DataSection> real;  ///< the [real] section, when the document has one
};

/// Checks `privdiff eval`'s options, written by the command as a document: [[eval]]'s keys at the
/// top (`evaluators`, `epochs`, ...), one [ID] table of options per evaluator, and [real] (the real
/// data, as a [data] section). Throws RecipeError listing every problem (with --set locations).
EvaluationChoice validate_evaluation(const RecipeDocument& document, const ComponentRegistry& registry);

}  // namespace privdiff::core
