#pragma once
/// @file
/// The common base of the eight component kinds a plugin can provide.

#include <privdiff/sdk_api.hpp>

#include <string>

namespace privdiff::sdk {

/// The eight kinds of component, one interface each.
enum class ComponentKind { model, adapter, mechanism, accountant, sampler, dataset, evaluator, auditor };

inline constexpr ComponentKind all_component_kinds[] = {
    ComponentKind::model,   ComponentKind::adapter, ComponentKind::mechanism, ComponentKind::accountant,
    ComponentKind::sampler, ComponentKind::dataset, ComponentKind::evaluator, ComponentKind::auditor};

/// "model", "adapter", "mechanism", "accountant", "sampler", "dataset", "evaluator", "auditor".
PRIVDIFF_SDK_API std::string to_string(ComponentKind kind);
/// "models", "mechanisms", ...
PRIVDIFF_SDK_API std::string plural(ComponentKind kind);

/// Base of every component. Components are created by the host through the factory their plugin
/// registered, owned by the host, and destroyed before process exit (plugins are never unloaded).
class PRIVDIFF_SDK_API Component {
 public:
  Component() = default;
  Component(const Component&) = delete;
  Component& operator=(const Component&) = delete;
  virtual ~Component();  // out of line: one vtable/typeinfo, in the SDK library
};

}  // namespace privdiff::sdk
