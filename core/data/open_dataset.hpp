#pragma once
// Opens the dataset a recipe's [data] section describes.

#include <privdiff/config/config.hpp>
#include <privdiff/data/dataset.hpp>

#include <memory>

namespace privdiff::core {

/// Throws std::runtime_error naming the [data] key at fault when the data cannot be opened.
std::unique_ptr<sdk::Dataset> open_dataset(const sdk::Config& data);

}  // namespace privdiff::core
