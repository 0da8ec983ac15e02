#pragma once
// The host's registry: every plugin it tried (loaded or refused) and the components of the
// loaded ones, looked up by (kind, id).
//
// No library shadows another's component id: when two loaded libraries register the same (kind, id)
// the id is ambiguous and find() has none for it, unless exactly one of them was chosen (a recipe's
// [plugins] use, choose_library) or both are the same bytes (two copies of one library: the first
// found is used). duplicate_notices() says each such case in one line.

#include "loader/loaded_plugin.hpp"

#include <privdiff/components/component.hpp>
#include <privdiff/config/config.hpp>

#include <filesystem>
#include <map>
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
  /// skipped. Ids it shares with another library become ambiguous (see above).
  const LoadedPlugin& add_library(const std::filesystem::path& path);
  /// add_library, and the library wins for every id it registers over libraries not chosen (a
  /// recipe's [plugins] use). Returns it loaded or refused.
  const LoadedPlugin& choose_library(const std::filesystem::path& path);
  /// Registers components compiled into the host itself (no library; `name` stands for the path),
  /// with the same duplicate-id rule. For embedding hosts and tools such as the recipe fuzzer.
  const LoadedPlugin& add_builtin(const std::string& name, std::vector<sdk::ComponentRegistration> components);
  /// Loads every plugin library (lib*.so) directly inside `dir`, in name order.
  /// A missing directory is not an error.
  void add_directory(const std::filesystem::path& dir);

  /// Every plugin tried, in load order.
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const { return plugins_; }
  /// The component that (kind, id) means; none when no loaded library has it or it is ambiguous.
  std::optional<RegisteredComponent> find(sdk::ComponentKind kind, const std::string& id) const;
  /// Ids of the loaded components of `kind` that find() has (ambiguous ones left out), sorted.
  std::vector<std::string> ids(sdk::ComponentKind kind) const;
  /// Why (kind, id) cannot be used although loaded libraries register it, naming each of them and
  /// how to choose one; empty when it is not ambiguous.
  std::string ambiguity(sdk::ComponentKind kind, const std::string& id) const;
  /// One line for each component id registered by more than one library: which library is used and
  /// why, for each one that is not; or that the id is ambiguous. Empty when no id is.
  std::vector<std::string> duplicate_notices() const;
  /// SHA-256 of `plugin`'s library file (64 hex digits), computed once; empty for components built
  /// into the host. Throws std::runtime_error naming the file when it cannot be read.
  std::string library_sha256(const LoadedPlugin& plugin) const;
  /// Why `id` is not available, for "unknown component" errors: names a refused plugin that is the
  /// likely provider (same id) or lists every refused plugin; empty when none was refused.
  std::string refused_hint(const std::string& id) const;

  /// Builds a component from its validated config. Throws std::runtime_error with context
  /// ("while constructing mechanism 'dpdm' from /…/libdpdm.so: …"), or the component's
  /// sdk::KeyValueError as it is (bad input at a key, for the caller to place in the recipe).
  std::unique_ptr<sdk::Component> create(sdk::ComponentKind kind, const std::string& id,
                                         const sdk::Config& config) const;

 private:
  const LoadedPlugin& add_checked(std::unique_ptr<LoadedPlugin> plugin);
  /// Every loaded provider of (kind, id), in load order.
  std::vector<RegisteredComponent> providers(sdk::ComponentKind kind, const std::string& id) const;
  /// Which of `providers` (two or more) is used, and why ("chosen", "same"); none when ambiguous.
  std::optional<RegisteredComponent> resolve(const std::vector<RegisteredComponent>& providers, std::string* why) const;
  bool chosen(const LoadedPlugin& plugin) const;

  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  std::vector<std::filesystem::path> chosen_;  ///< canonical paths of chosen libraries
  mutable std::map<std::filesystem::path, std::string> sha256_;  ///< library_sha256's cache
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
