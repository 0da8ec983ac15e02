#pragma once
// Opens one plugin library with Boost.DLL, checks its descriptor and runs its registration.
// Never throws and never unloads: a library stays mapped for the life of the process because
// its code (vtables, autograd nodes, modules grafted into other plugins' models) can outlive
// any object that refers to it.

#include "loader/loaded_plugin.hpp"

#include <filesystem>

namespace privdiff::core {

/// Loads `path` (made absolute). The result is either loaded, with the plugin's component
/// registrations, or refused with a one-line reason, e.g.
/// "plugin ABI version 2, this privdiff expects 1 (rebuild the plugin against this SDK)".
LoadedPlugin load_plugin(const std::filesystem::path& path);

}  // namespace privdiff::core
