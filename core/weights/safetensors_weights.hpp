#pragma once
// Where [run] init_from finds safetensors weights (loaded by name with the SDK's
// load_pretrained_weights, privdiff/diffusion/pretrained_weights.hpp).

#include <filesystem>
#include <optional>

namespace privdiff::core {

/// The safetensors file `path` names for init_from: itself (a .safetensors file), or in a folder that
/// is not a run directory the model.safetensors of a privdiff export or the
/// diffusion_pytorch_model.safetensors of a diffusers model; nullopt otherwise.
std::optional<std::filesystem::path> safetensors_init_file(const std::filesystem::path& path);

}  // namespace privdiff::core
