#pragma once
// `privdiff weights import SRC`: weights from outside privdiff checked against the model plugin
// that runs them (every tensor loaded by name into the SDK's port), the recipe tables that start a
// run from them printed, and with -o the weights written under the port's own names.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace privdiff::core {

struct WeightsImport {
  std::string architecture;  ///< what the source is, in words
  std::string recipe;        ///< the [run] and [model] tables that start from it
  std::filesystem::path written;  ///< the weights file written (empty without an output folder)
};

/// The "_class_name" of a diffusers config.json. Throws std::runtime_error naming the file when it is
/// not valid JSON.
std::string diffusers_class_name(const std::filesystem::path& config_json);

/// Imports a diffusers UNet2DModel folder or DPDM's network (safetensors converted by
/// scripts/convert_to_safetensors.py --dpdm). image_size: the images the model makes (DPDM's weights
/// do not record it). With `out`, writes out/model.safetensors under the port's names, with the
/// source's content hash in its metadata. Throws std::runtime_error naming the source and what does
/// not fit; nothing is written then.
WeightsImport import_weights(const std::filesystem::path& source, std::optional<std::int64_t> image_size,
                             const std::optional<std::filesystem::path>& out);

}  // namespace privdiff::core
