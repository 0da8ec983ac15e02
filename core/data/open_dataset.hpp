#pragma once
// Opens the datasets a recipe names ([data] or [data.NAME]) through their dataset plugins.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <privdiff/components/dataset.hpp>

#include <memory>

namespace privdiff::core {

/// Builds the section's dataset with its plugin and applies the host's `classes` filter. Throws
/// std::runtime_error starting with the section's path ("data.private: ...") when it cannot.
std::unique_ptr<sdk::Dataset> open_dataset(const DataSection& section, const ComponentRegistry& registry);

}  // namespace privdiff::core
