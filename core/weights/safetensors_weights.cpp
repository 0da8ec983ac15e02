#include "weights/safetensors_weights.hpp"

namespace privdiff::core {

namespace fs = std::filesystem;

std::optional<fs::path> safetensors_init_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() == ".safetensors") return path;
    return std::nullopt;
  }
  if (!fs::is_directory(path, ec) || fs::exists(path / "checkpoint.pt", ec)) return std::nullopt;
  // A privdiff export, or a diffusers model folder.
  for (const char* name : {"model.safetensors", "diffusion_pytorch_model.safetensors"}) {
    if (fs::is_regular_file(path / name, ec)) return path / name;
  }
  return std::nullopt;
}

}  // namespace privdiff::core
