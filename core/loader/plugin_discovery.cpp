#include "loader/plugin_discovery.hpp"

#include <cstdlib>
#include <sstream>

namespace privdiff::core {

namespace fs = std::filesystem;

std::vector<fs::path> plugin_path_from_environment() {
  std::vector<fs::path> dirs;
  const char* env = std::getenv("PRIVDIFF_PLUGIN_PATH");
  if (!env) return dirs;
  std::istringstream in(env);
  std::string item;
  while (std::getline(in, item, ':')) {
    if (!item.empty()) dirs.emplace_back(item);
  }
  return dirs;
}

fs::path default_plugin_directory() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path().parent_path() / PRIVDIFF_PLUGIN_RELATIVE_DIR;
}

}  // namespace privdiff::core
