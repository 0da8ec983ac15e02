#pragma once
/// @file
/// Weights from a safetensors file loaded into a model by name: a privdiff export, a diffusers
/// folder's weights, DPDM's network (its score_sde NIN layers read transposed, ncsnpp.hpp) or a
/// CompVis latent diffusion checkpoint (its noise schedule and EMA copy beside the networks skipped).
/// What `[run] init_from`, `privdiff sample RECIPE` and model plugins that read a pretrained part
/// (a diffusers autoencoder) use.

#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>

#include <filesystem>

namespace privdiff::sdk {

/// Copies the file's tensors into `module`'s parameters and buffers, name by name (converted to their
/// dtype; DPDM's NIN layers from their W and b). Every one must be there with the same shape (weights
/// [C', C, 1] fill a [C', C] tensor), except an adapter's (which keeps its initial, identity values);
/// the file may hold nothing the module lacks (but a CompVis checkpoint's noise schedule and EMA
/// copy, beside its "ldm.config", and an older transformers text encoder's position ids 0 … P-1). A module
/// whose every tensor lives under one child also loads a file saved without that child's name
/// (transformers 5's text encoders drop CLIPTextModel's "text_model."). Throws std::runtime_error naming
/// the file and the first mismatch (a missing or unexpected name, or both shapes); the module is left
/// unchanged then.
PRIVDIFF_SDK_API void load_pretrained_weights(const std::filesystem::path& file, torch::nn::Module& module);

}  // namespace privdiff::sdk
