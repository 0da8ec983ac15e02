#pragma once
// What the host knows about one plugin library: loaded (with its components) or refused (and why).

#include <privdiff/plugin/registrar.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::core {

struct LoadedPlugin {
  std::filesystem::path path;  ///< absolute (for components built into the host: the host's name)
  bool loaded = false;
  bool built_in = false;       ///< compiled into the host (ComponentRegistry::add_builtin): no library file
  std::string refusal;         ///< why it was refused; empty when loaded
  // From the descriptor (empty when there was no readable descriptor).
  std::string plugin_id;
  std::string version;
  std::string description;
  std::vector<sdk::ComponentRegistration> components;
};

}  // namespace privdiff::core
