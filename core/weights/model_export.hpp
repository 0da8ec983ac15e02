#pragma once
// `privdiff weights export`: a trained run's model as safetensors for the Python ecosystem, with
// the privacy guarantee it was trained under written into the file's metadata and a model card —
// a model handed on without its epsilon, delta and data is a model whose guarantee is lost.

#include <privdiff/components/model.hpp>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

/// The metadata keys an export writes (all strings, as safetensors requires).
namespace export_keys {
inline constexpr const char* model = "privdiff.model";        ///< the [model] type
inline constexpr const char* recipe = "privdiff.recipe";      ///< the run's resolved recipe.toml
inline constexpr const char* privacy = "privdiff.privacy";    ///< JSON: guarantee, data, caveats, ledger
inline constexpr const char* epsilon = "privdiff.epsilon";    ///< by the calibrating accountant; "" when not private
inline constexpr const char* delta = "privdiff.delta";
inline constexpr const char* accountant = "privdiff.accountant";
inline constexpr const char* version = "privdiff.version";
}  // namespace export_keys

struct ModelExport {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  ///< parameters and buffers by state-dict name
  std::map<std::string, std::string> metadata;
  std::string model_card;  ///< README.md: what the model is, its guarantee, how to load it
  /// The run's recipe.toml as it may be published: without its seeds when the run drew reproducible
  /// noise (secure_noise = false), whose guarantee holds only while the seed stays secret (seed 0, the
  /// public default, stays: it is no secret).
  std::string recipe;
};

/// A number as the export writes it into its metadata and card (6 significant digits).
std::string export_number(double value);

/// `recipe_text` without its `seed = ...` lines, each replaced by a comment saying it was withheld;
/// except `seed = 0`, privdiff's public default, which hides nothing and stays with a comment saying so.
std::string without_seeds(const std::string& recipe_text);

/// Whether a recipe line is `seed = 0` (the public default of [run] seed).
bool is_public_default_seed(const std::string& line);

/// The export of `model`, trained by the finished run in `run_dir` (its recipe.toml and summary.json):
/// tensors, the model card written around `privacy` (the release gate's statement,
/// release::run_export_statement) and the recipe. The privacy metadata keys are the gate's to set
/// (release::export_run does both). Throws std::runtime_error naming a report that cannot be read.
ModelExport export_run_model(const std::filesystem::path& run_dir, sdk::Model& model, const nlohmann::json& privacy);

/// Writes `e` into `dir` (created): model.safetensors, README.md and privdiff-recipe.toml (e.recipe, also
/// in the metadata). With a diffusers config.json (a diffusers_unet model), the folder is a diffusers
/// model folder instead: diffusion_pytorch_model.safetensors and config.json, which
/// UNet2DModel.from_pretrained (or UNet2DConditionModel's) loads.
void write_model_export(const ModelExport& e, const std::filesystem::path& dir, const std::string& diffusers_config = "");

/// Folds every adapter of `module` (LoRA, IA3: the layer's "adapter" submodule) into its layer's
/// weight and bias, as sampling computes them, and drops the adapters' tensors from `e`: a diffusers
/// folder then holds the base model's names only. Returns how many layers were folded.
int fold_adapters(ModelExport& e, torch::nn::Module& module);

}  // namespace privdiff::core
