#pragma once
// A dataset's identity for resume checks and provenance: its name, size and a hash of every
// image and label as the stages see them.

#include <privdiff/data/dataset.hpp>

#include <string>

namespace privdiff::core {

/// "NAME|N=...|classes=...|hash=<64-bit FNV-1a hex>". Reads the dataset in chunks (bounded memory).
/// The hash detects changed data; it is not a cryptographic commitment.
std::string dataset_fingerprint(const sdk::Dataset& data);

}  // namespace privdiff::core
