#pragma once
/// @file
/// Registrar: what a plugin's registration function fills in. Registration only declares
/// components (id, one-line description, schema, factory); nothing is constructed until a recipe
/// asks for it, and then only with an already-validated Config.

#include <privdiff/components/component.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/sdk_api.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk {

/// Builds a component from its validated config. May throw (the host adds context).
using ComponentFactory = std::function<std::unique_ptr<Component>(const Config&)>;

struct ComponentRegistration {
  ComponentKind kind = ComponentKind::model;
  std::string id;           ///< lowercase [a-z0-9_-], unique per kind across all loaded plugins
  std::string description;  ///< one line
  Schema schema;
  ComponentFactory factory;
};

class PRIVDIFF_SDK_API Registrar {
 public:
  /// Adds a component. Throws std::invalid_argument for a malformed id, an empty description,
  /// no factory, or an id this registrar already holds for the same kind.
  void add(ComponentRegistration registration);

  /// Adds `Impl` (a class deriving from Model, Mechanism, Accountant, Sampler, Dataset or Auditor, constructible
  /// from `const Config&`) under `id`.
  template <class Impl>
  void add(std::string id, std::string description, Schema schema) {
    add(ComponentRegistration{Impl::kind, std::move(id), std::move(description), std::move(schema),
                              [](const Config& config) -> std::unique_ptr<Component> {
                                return std::make_unique<Impl>(config);
                              }});
  }

  const std::vector<ComponentRegistration>& registrations() const { return registrations_; }

 private:
  std::vector<ComponentRegistration> registrations_;
};

}  // namespace privdiff::sdk
