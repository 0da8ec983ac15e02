#pragma once
/// @file
/// PRIVDIFF_PLUGIN(...): the one line a plugin library needs to describe itself to the host.
///
///     void register_components(privdiff::sdk::Registrar* r) { r->add<MyAccountant>(...); }
///     PRIVDIFF_PLUGIN("my_plugin", "0.1.0", "One line about it", register_components)
///
/// It defines the PluginDescriptor with this build's ABI version, size and fingerprint, and exports
/// it with Boost.DLL's BOOST_DLL_ALIAS under the name `privdiff_plugin`. Nothing runs at load time:
/// the host calls the registration function only after it has checked the descriptor.

#include <privdiff/plugin/descriptor.hpp>
#include <privdiff/plugin/fingerprint.hpp>
#include <privdiff/plugin/registrar.hpp>

#include <boost/dll/alias.hpp>

/// Defines and exports a descriptor with explicit field values. Plugins use PRIVDIFF_PLUGIN;
/// this lower-level form exists so tests can build deliberately broken plugins.
#define PRIVDIFF_PLUGIN_DESCRIPTOR(abi, size, id, version, description, fingerprint, register_fn) \
  namespace {                                                                                     \
  const ::privdiff::sdk::PluginDescriptor privdiff_plugin_descriptor_instance = {                \
      (abi), (size), (id), (version), (description), (fingerprint), (register_fn)};               \
  }                                                                                               \
  BOOST_DLL_ALIAS(privdiff_plugin_descriptor_instance, privdiff_plugin)

#define PRIVDIFF_PLUGIN(id, version, description, register_fn)                               \
  PRIVDIFF_PLUGIN_DESCRIPTOR(::privdiff::sdk::plugin_abi_version,                            \
                             static_cast<std::uint32_t>(sizeof(::privdiff::sdk::PluginDescriptor)), \
                             id, version, description, PRIVDIFF_BUILD_FINGERPRINT, register_fn)
