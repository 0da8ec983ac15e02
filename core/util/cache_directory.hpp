#pragma once
// Where privdiff keeps what it computed once and may need again (feature networks, near-duplicate
// answers): per user, never in a run directory.

#include "util/usage_error.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace privdiff::core {

/// `chosen` if set, else $PRIVDIFF_CACHE_DIR, $XDG_CACHE_HOME/privdiff, ~/.cache/privdiff, or a folder
/// under the temporary directory. A path that exists and is not a folder is refused (UsageError, naming
/// where it came from): a cache written into it would fail later with the file system's own text.
inline std::filesystem::path cache_directory(const std::filesystem::path& chosen = {}) {
  namespace fs = std::filesystem;
  auto folder = [](const fs::path& path, const std::string& source) {
    std::error_code error;
    if (fs::exists(path, error) && !fs::is_directory(path, error)) {
      throw UsageError(source + " " + path.string() + " is not a folder (privdiff keeps its cache there: point it "
                       "at a folder, or remove the file)");
    }
    return path;
  };
  if (!chosen.empty()) return folder(chosen, "the cache folder");
  if (const char* dir = std::getenv("PRIVDIFF_CACHE_DIR"); dir && *dir) return folder(dir, "PRIVDIFF_CACHE_DIR");
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) {
    return folder(fs::path(dir) / "privdiff", "$XDG_CACHE_HOME/privdiff");
  }
  if (const char* home = std::getenv("HOME"); home && *home) return folder(fs::path(home) / ".cache" / "privdiff", "~/.cache/privdiff");
  return folder(fs::temp_directory_path() / "privdiff-cache", "the temporary cache folder");
}

}  // namespace privdiff::core
