#pragma once
// Crash-safe file writes: a reader sees the old file or the new one, never a torn one.

#include <filesystem>
#include <string>

namespace privdiff::core {

/// Writes `contents` to a temporary file beside `path`, flushes it to disk and renames it over
/// `path`. Throws std::runtime_error (with the path) on failure; `path` is then untouched.
void write_file_atomically(const std::filesystem::path& path, const std::string& contents);

/// Reads a whole file; throws std::runtime_error naming the path when it cannot.
std::string read_file(const std::filesystem::path& path);

}  // namespace privdiff::core
