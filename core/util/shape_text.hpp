#pragma once
// The SDK's shape text (privdiff/io/shape_text.hpp), under the host's namespace.

#include <privdiff/io/shape_text.hpp>

namespace privdiff::core {
using sdk::shape_text;
}  // namespace privdiff::core
