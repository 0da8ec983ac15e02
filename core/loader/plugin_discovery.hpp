#pragma once
// Where the host looks for plugins, in order (an id two libraries register is ambiguous unless the
// recipe's [plugins] use chooses one: component_registry.hpp):
//   1. directories given on the command line (--plugin-path) and in $PRIVDIFF_PLUGIN_PATH
//      (':'-separated),
//   2. the recipe's [plugins] search list (relative to the recipe file),
//   3. the plugins next to the executable: <exe>/../<libdir>/privdiff/plugins (libdir as
//      configured, usually "lib"), which is both the build tree's and the install prefix's layout.

#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::core {

/// The directories in $PRIVDIFF_PLUGIN_PATH, in order.
std::vector<std::filesystem::path> plugin_path_from_environment();
/// <directory of the running executable>/../<libdir>/privdiff/plugins.
std::filesystem::path default_plugin_directory();

}  // namespace privdiff::core
