#pragma once
// The `classes` filter of a [data] section, for any dataset plugin: a view of the examples whose
// labels are listed (labels keep their values).

#include <privdiff/components/dataset.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::core {

/// Throws sdk::KeyValueError at `key_path` for a class the data do not have (outside [0, num_classes)).
std::unique_ptr<sdk::Dataset> keep_classes(std::unique_ptr<sdk::Dataset> data, const std::vector<std::int64_t>& classes,
                                           const std::string& key_path);

}  // namespace privdiff::core
