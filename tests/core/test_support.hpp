#pragma once
// Shared helpers for the core tests: fixture locations and a registry with the fixture plugin.

#include "loader/component_registry.hpp"

#include <filesystem>
#include <string>

namespace privdiff::core::testing {

inline std::filesystem::path fixture_plugin_dir(const std::string& name) {
  return std::filesystem::path(PRIVDIFF_TEST_PLUGIN_DIR) / name;
}
inline std::filesystem::path fixture_plugin(const std::string& name) {
  const std::string lib = name == "good" ? "libfixture_components.so" : "libfixture_" + name + ".so";
  return fixture_plugin_dir(name) / lib;
}
inline std::filesystem::path fixture_path(const std::string& relative) {
  return std::filesystem::path(PRIVDIFF_TEST_FIXTURE_DIR) / relative;
}
/// A registry holding just the good fixture plugin (one component of each kind).
inline const ComponentRegistry& fixture_registry() {
  static ComponentRegistry* registry = [] {
    auto* r = new ComponentRegistry();
    r->add_directory(fixture_plugin_dir("good"));
    return r;
  }();
  return *registry;
}

}  // namespace privdiff::core::testing
