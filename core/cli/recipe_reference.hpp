#pragma once
// `privdiff plugins reference`: every recipe key of the host's sections and of every installed
// component, as Markdown. docs/recipe-reference.md and docs/reference/ are its output, checked by a test, so the guide's
// key reference cannot drift from the schemas the recipes are validated against.

#include "loader/component_registry.hpp"

#include <string>
#include <vector>

namespace privdiff::core::cli {

struct ReferencePage {
  std::string path;  ///< relative to docs/, e.g. "reference/models.md"
  std::string text;  ///< Markdown
};

/// Where a component of `kind` goes in a recipe, e.g. `[[stage]] mechanism = "dpdm"` (plugins show,
/// the reference).
std::string recipe_placement(sdk::ComponentKind kind, const std::string& id);

/// recipe-reference.md (the host's sections and an index) and one page per component kind.
std::vector<ReferencePage> recipe_reference(const ComponentRegistry& registry);

}  // namespace privdiff::core::cli
