#pragma once
/// @file
/// Which parameters a stage trains: by role (attention, resblock, conditioning, ...), by block
/// index range in the model's forward order (DP-LDM's "fine-tune the transformer blocks from index N
/// on"), by name pattern, or by preset. Every mechanism can use it; frozen parameters get no
/// per-example gradients at all (the per-example layers skip them), no optimizer state and no EMA,
/// and stay bit-identical.

#include <privdiff/components/model.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/sdk_api.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk::engine {

struct ParameterSelection {
  /// "all" | "attention" (DP-LDM: attention and cross-attention blocks + the class embedding) |
  /// "resblocks" | "adapter" (only the parameters of the model's adapter, e.g. LoRA's factors; "lora"
  /// is accepted for it) |
  /// "autoencoder" (a latent model's autoencoder, by its own objective; "all" leaves it frozen).
  std::string preset = "all";
  std::vector<std::string> roles;  ///< when set, replaces the preset's roles
  /// Inclusive [first, last] block indices (last = -1: to the end). Constrains only parameters that
  /// belong to a numbered block; the others (embeddings, input/output layers) pass by role alone.
  std::optional<std::pair<int, int>> blocks;
  /// DP-LDM's ablation_blocks: attention blocks are numbered 1, 2, ... in forward order (see
  /// attention_numbers); only those numbered this or higher are kept. Other roles are unaffected.
  std::optional<int> attention_from;
  std::string pattern;  ///< ECMAScript regex searched in the parameter name; empty = any
};

/// For each parameter, the number of its attention block (1, 2, ... in forward order, counting blocks
/// with an "attention" or "cross_attention" parameter), or 0 for a parameter of no attention block.
PRIVDIFF_SDK_API std::vector<int> attention_numbers(const std::vector<ParameterInfo>& parameters);

/// The model's parameters with their roles, where every parameter of an adapter (linear_adapter.hpp)
/// has the role "adapter" whatever the model says: models know nothing of adapters.
PRIVDIFF_SDK_API std::vector<ParameterInfo> parameters_with_roles(Model& model);

/// The roles a preset trains.
PRIVDIFF_SDK_API std::vector<std::string> preset_roles(const std::string& preset);
/// Adds the keys train, train_roles, train_blocks, train_attention_from and train_pattern to a mechanism's schema.
PRIVDIFF_SDK_API Schema& add_parameter_selection_keys(Schema& schema);
/// Reads them; throws std::invalid_argument naming the key for a bad block range or regex.
PRIVDIFF_SDK_API ParameterSelection parameter_selection(const Config& config);
/// Whether each parameter is selected, in order.
PRIVDIFF_SDK_API std::vector<bool> selected_parameters(const std::vector<ParameterInfo>& parameters,
                                                       const ParameterSelection& selection);
/// Sets requires_grad on the selected parameters and clears it on the others. Returns the number of
/// trainable scalars; throws std::invalid_argument when the selection matches nothing, or selects the
/// autoencoder together with the diffusion network (they train by different objectives).
PRIVDIFF_SDK_API std::int64_t apply_parameter_selection(Model& model, const ParameterSelection& selection);

}  // namespace privdiff::sdk::engine
