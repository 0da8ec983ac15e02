#pragma once
// Where privdiff keeps what it computed once and may need again (feature networks, near-duplicate
// answers): per user, never in a run directory.

#include <cstdlib>
#include <filesystem>

namespace privdiff::core {

/// `chosen` if set, else $PRIVDIFF_CACHE_DIR, $XDG_CACHE_HOME/privdiff, ~/.cache/privdiff, or a folder
/// under the temporary directory.
inline std::filesystem::path cache_directory(const std::filesystem::path& chosen = {}) {
  namespace fs = std::filesystem;
  if (!chosen.empty()) return chosen;
  if (const char* dir = std::getenv("PRIVDIFF_CACHE_DIR"); dir && *dir) return dir;
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return fs::path(dir) / "privdiff";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "privdiff";
  return fs::temp_directory_path() / "privdiff-cache";
}

}  // namespace privdiff::core
