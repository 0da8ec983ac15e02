#pragma once
/// @file
/// Crash-safe file writes: a reader sees the old file or the new one, never a torn one.

#include <privdiff/sdk_api.hpp>

#include <filesystem>
#include <string>

namespace privdiff::sdk {

/// Writes `contents` to a temporary file beside `path`, flushes it to disk and renames it over
/// `path`. Throws std::runtime_error (with the path) on failure; `path` is then untouched.
PRIVDIFF_SDK_API void write_file_atomically(const std::filesystem::path& path, const std::string& contents);

/// Removes the `NAME.tmp.PID` files that write_file_atomically leaves in `dir` when a process is
/// killed mid-write (for a directory no live process is writing into). Returns how many.
PRIVDIFF_SDK_API int remove_stale_temporary_files(const std::filesystem::path& dir);

/// True when `dir` holds nothing but such `NAME.tmp.PID` files (a run killed while writing its
/// first file): as good as empty once they are removed.
PRIVDIFF_SDK_API bool holds_only_temporary_files(const std::filesystem::path& dir);

/// Reads a whole file; throws std::runtime_error naming the path when it cannot.
PRIVDIFF_SDK_API std::string read_file(const std::filesystem::path& path);

}  // namespace privdiff::sdk
