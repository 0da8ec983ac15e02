#pragma once
/// @file
/// The plugin descriptor: one plain C struct per plugin library, exported under the alias
/// `privdiff_plugin` (see export.hpp). The host reads and checks it before it touches any C++
/// interface of the plugin, so its layout is frozen: `abi_version` and `descriptor_size` stay the
/// first two fields in every future version; anything else may change only with a new ABI version.

#include <cstdint>

namespace privdiff::sdk {

class Registrar;

/// Version of the plugin ABI: the descriptor layout and the C++ interfaces a plugin implements.
/// Bump it whenever a change to an SDK interface would break an already-built plugin (5: a virtual
/// Accountant::is_upper_bound and Evaluator::metric_names, which move the vtables' later slots;
/// 6: DpSgdMechanism::clip_factors, a virtual before clipped_chunk_sum, and the engine's clip rules;
/// 7: Mechanism::public_data_name and StageContext::public_data, for PrivImage's semantic query;
/// 8: DpSgdMechanism's step releases, after_step_gradient, clip norm, mechanism state, step metrics and
/// noise bases, StepRelease::relative_to_sigma, ReleasedStatistic::noise_multiplier, StepReport's
/// sensitivity and noise bases: the mechanism checks' second round; 9: Mechanism::check_public_data,
/// a virtual before run; 10: captions — Dataset::has_captions/captions, Model::conditions_on_text,
/// Conditioning::captions, SampleRequest::captions, KarrasRun::cond; 11: LabelledImages::prompts, the
/// evaluators' view of the samples' prompts; 12: DpSgdOptions::clip_passes and EnginePlan::passes, the
/// two-backward clipping).
inline constexpr std::uint32_t plugin_abi_version = 12;

/// Name of the exported alias that holds a pointer to the descriptor.
inline constexpr const char* plugin_descriptor_symbol = "privdiff_plugin";

/// Signature of a plugin's registration entry point. It adds the plugin's components to the
/// registrar; it may throw, in which case the host refuses the whole plugin.
using RegisterComponentsFn = void (*)(Registrar* registrar);

/// What a plugin library tells the host about itself. All strings are static, UTF-8, not null.
struct PluginDescriptor {
  std::uint32_t abi_version;       ///< plugin_abi_version the plugin was built with (field 1, frozen)
  std::uint32_t descriptor_size;   ///< sizeof(PluginDescriptor) in the plugin's build (field 2, frozen)
  const char* plugin_id;           ///< lowercase id, e.g. "dpdm"
  const char* plugin_version;      ///< the plugin's own version, e.g. "0.1.0"
  const char* description;         ///< one line, shown by `privdiff plugins list`
  const char* build_fingerprint;   ///< PRIVDIFF_BUILD_FINGERPRINT of the plugin's build
  RegisterComponentsFn register_components;  ///< called once by the host after all checks pass
};

}  // namespace privdiff::sdk
