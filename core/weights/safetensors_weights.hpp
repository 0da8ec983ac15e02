#pragma once
// Weights from a safetensors file as a model's initial weights ([run] init_from): a privdiff export
// (weights/model_export.hpp) or weights from outside privdiff, matched to the model by name.

#include <torch/nn/module.h>

#include <filesystem>
#include <optional>

namespace privdiff::core {

/// The safetensors file `path` names for init_from: itself (a .safetensors file), or in a folder that
/// is not a run directory the model.safetensors of a privdiff export or the
/// diffusion_pytorch_model.safetensors of a diffusers model; nullopt otherwise.
std::optional<std::filesystem::path> safetensors_init_file(const std::filesystem::path& path);

/// Copies the file's tensors into `module`'s parameters and buffers, name by name (converted to their
/// dtype; DPDM's NIN layers from their W and b, diffusion/ncsnpp.hpp). Every one must be there with the same shape, except an adapter's (which keeps its initial,
/// identity values); the file may hold nothing the module lacks (but a CompVis checkpoint's noise
/// schedule and EMA copy, beside its "ldm.config"). Weights [C', C, 1] fill a [C', C] tensor. Throws std::runtime_error naming the
/// file and the first mismatch (a missing or unexpected name, or both shapes); the module is left
/// unchanged then.
void load_safetensors_weights(const std::filesystem::path& file, torch::nn::Module& module);

}  // namespace privdiff::core
