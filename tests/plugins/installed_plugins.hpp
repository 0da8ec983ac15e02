#pragma once
// The plugins built into this tree (build/lib/privdiff/plugins), loaded once per test binary, and
// a helper to construct one with a validated config.

#include "loader/component_registry.hpp"
#include "loader/plugin_discovery.hpp"

#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace privdiff::testing {

inline const core::ComponentRegistry& installed_plugins() {
  static auto* registry = [] {
    auto* r = new core::ComponentRegistry();
    r->add_directory(core::default_plugin_directory());
    return r;
  }();
  return *registry;
}

/// Constructs installed component `id` of interface T from `values` (checked, defaults filled).
template <class T>
std::unique_ptr<T> make_installed(const std::string& id, std::map<std::string, sdk::ConfigValue> values = {}) {
  auto found = installed_plugins().find(T::kind, id);
  if (!found) throw std::runtime_error(sdk::to_string(T::kind) + " plugin '" + id + "' is not built");
  return core::create_component<T>(installed_plugins(), id,
                                   sdk::make_config(found->registration->schema, sdk::to_string(T::kind), std::move(values)));
}

/// The message of what `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace privdiff::testing
