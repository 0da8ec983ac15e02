#pragma once
/// @file
/// What the `pixel_unet` and `latent_unet` models share about their UNet: the recipe keys (the
/// same names, ranges and order in both, so a recipe's [model] keys mean the same in either) and
/// how they are read into a UnetConfig. Each model keeps its own defaults — DPDM's pixel UNet and
/// DP-LDM's latent one differ — and the docs that cite them.

#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk::diffusion {

/// A key's default and the one-line doc that goes with it (the doc often names the default's source).
template <class T>
struct KeyDefault {
  T value;
  std::string doc;
};

/// What one model sets about the shared UNet keys.
struct UnetKeyDefaults {
  KeyDefault<std::int64_t> channels;                            ///< base channels
  KeyDefault<std::vector<std::int64_t>> channel_mult;           ///< multiplier per resolution level
  KeyDefault<std::int64_t> num_res_blocks;                      ///< residual blocks per level
  KeyDefault<std::vector<std::int64_t>> attention_resolutions;  ///< resolutions with attention
  /// Fewest classes num_classes accepts (0 allows an unconditional model); its default is 10.
  std::int64_t min_classes = 0;
  std::string num_classes_doc;
  std::string preconditioning_doc;  ///< doc of `preconditioning` (default "edm")
  /// Adds transformer_heads, transformer_head_dim, transformer_depth and context_dim (DP-LDM's
  /// defaults) after attention_resolutions: attention blocks become SpatialTransformers.
  bool spatial_transformers = false;
};

/// Adds, in this order: channels, channel_mult, num_res_blocks, attention_resolutions, the
/// transformer keys (when `defaults.spatial_transformers`), dropout, num_classes, preconditioning,
/// label_dropout, image_size, image_channels. Throws std::invalid_argument for a default outside
/// its key's range (as Schema::add).
PRIVDIFF_SDK_API Schema& add_unet_keys(Schema& schema, const UnetKeyDefaults& defaults);

/// Reads the keys add_unet_keys added (the transformer keys where present) into the options of a
/// UNet whose input is `input_channels` x `input_size` x `input_size`: the images for a pixel
/// model, the latents for a latent one.
PRIVDIFF_SDK_API UnetConfig unet_config(const Config& config, std::int64_t input_channels, std::int64_t input_size);

}  // namespace privdiff::sdk::diffusion
