#pragma once
// The SDK's content hash (privdiff/io/content_hash.hpp), under the host's namespace.

#include <privdiff/io/content_hash.hpp>

namespace privdiff::core {
using sdk::content_hash;
using sdk::fnv1a64;
}  // namespace privdiff::core
