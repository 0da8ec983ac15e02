#pragma once
// The SDK's crash-safe file writes (privdiff/io/atomic_file.hpp), under the host's namespace.

#include <privdiff/io/atomic_file.hpp>

namespace privdiff::core {
using sdk::holds_only_temporary_files;
using sdk::read_file;
using sdk::remove_stale_temporary_files;
using sdk::write_file_atomically;
}  // namespace privdiff::core
