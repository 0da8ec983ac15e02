#pragma once
// The host's registry: every plugin it tried (loaded or refused) and the components of the
// loaded ones, looked up by (kind, id).

#include "loader/loaded_plugin.hpp"

#include <privdiff/components/component.hpp>
#include <privdiff/config/config.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

/// A component as the registry knows it: its registration and the plugin that provides it.
struct RegisteredComponent {
  const sdk::ComponentRegistration* registration = nullptr;
  const LoadedPlugin* plugin = nullptr;
};

class ComponentRegistry {
 public:
  ComponentRegistry() = default;
  ComponentRegistry(const ComponentRegistry&) = delete;
  ComponentRegistry& operator=(const ComponentRegistry&) = delete;

  /// Loads one library (see load_plugin). A library already tried (same canonical path) is
  /// skipped. A plugin whose component ids clash with already registered ones is refused whole.
  const LoadedPlugin& add_library(const std::filesystem::path& path);
  /// Registers components compiled into the host itself (no library; `name` stands for the path),
  /// with the same duplicate-id rule. For embedding hosts and tools such as the recipe fuzzer.
  const LoadedPlugin& add_builtin(const std::string& name, std::vector<sdk::ComponentRegistration> components);
  /// Loads every plugin library (lib*.so) directly inside `dir`, in name order.
  /// A missing directory is not an error.
  void add_directory(const std::filesystem::path& dir);

  /// Every plugin tried, in load order.
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const { return plugins_; }
  std::optional<RegisteredComponent> find(sdk::ComponentKind kind, const std::string& id) const;
  /// Ids of the loaded components of `kind`, sorted.
  std::vector<std::string> ids(sdk::ComponentKind kind) const;
  /// Why `id` is not available, for "unknown component" errors: names a refused plugin that is the
  /// likely provider (same id) or lists every refused plugin; empty when none was refused.
  std::string refused_hint(const std::string& id) const;

  /// Builds a component from its validated config. Throws std::runtime_error with context
  /// ("while constructing mechanism 'dpdm' from /…/libdpdm.so: …").
  std::unique_ptr<sdk::Component> create(sdk::ComponentKind kind, const std::string& id,
                                         const sdk::Config& config) const;

 private:
  /// Appends `plugin`, refusing it whole when one of its ids is already registered.
  const LoadedPlugin& add_checked(std::unique_ptr<LoadedPlugin> plugin);
  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
};

/// Like ComponentRegistry::create, then casts to the interface; T is Model, Mechanism, ...
template <class T>
std::unique_ptr<T> create_component(const ComponentRegistry& registry, const std::string& id,
                                    const sdk::Config& config) {
  auto component = registry.create(T::kind, id, config);
  auto* typed = dynamic_cast<T*>(component.get());
  if (!typed) {
    throw std::runtime_error(sdk::to_string(T::kind) + " '" + id + "' does not implement the " +
                             sdk::to_string(T::kind) + " interface");
  }
  component.release();
  return std::unique_ptr<T>(typed);
}

}  // namespace privdiff::core
