#pragma once
/// @file
/// ClipModel: transformers' CLIPModel (OpenAI's CLIP, open_clip's in transformers' layout), both towers
/// under transformers' names (text_model.*, vision_model.embeddings.patch_embedding.weight, ...,
/// visual_projection.weight, text_projection.weight, logit_scale), so a CLIP checkpoint's
/// model.safetensors loads by name. What a CLIP score needs: the normalised image and text embeddings
/// (CLIPModel's image_embeds / text_embeds). Equal to transformers' within 1e-5 on tiny random models
/// (tests/fixtures/weights/clip).

#include <privdiff/sdk_api.hpp>
#include <privdiff/text_encoders/clip_text_model.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>

namespace privdiff::sdk::text_encoders {

struct ClipVisionConfig {
  std::int64_t hidden_size = 768, intermediate_size = 3072, layers = 12, heads = 12;
  std::int64_t image_size = 224, patch_size = 32, num_channels = 3;
  double layer_norm_eps = 1e-5;
  bool quick_gelu = true;
};

struct ClipModelConfig {
  ClipTextConfig text;
  ClipVisionConfig vision;
  std::int64_t projection_dim = 512;
};

/// A CLIPModel config.json (model_type "clip", its text_config and vision_config). std::invalid_argument
/// naming the key for what the port cannot run (as clip_text_config; a patch size that does not divide
/// the image size).
PRIVDIFF_SDK_API ClipModelConfig clip_model_config(const std::string& json_text, const std::string& what);

class PRIVDIFF_SDK_API ClipModel : public torch::nn::Module {
 public:
  explicit ClipModel(ClipModelConfig config);
  /// CLIPModel's image_embeds: pixel_values [N, num_channels, image_size, image_size] (preprocessed as
  /// clip_pixel_values does) -> the projected, L2-normalised CLS output [N, projection_dim].
  at::Tensor image_embeds(const at::Tensor& pixel_values);
  /// CLIPModel's text_embeds: token ids [N, T] (CLIP's tokenizer, no mask) -> the projected,
  /// L2-normalised pooled output [N, projection_dim].
  at::Tensor text_embeds(const at::Tensor& ids);
  const ClipModelConfig& config() const { return config_; }

 private:
  ClipModelConfig config_;
  std::shared_ptr<ClipTextModel> text_;
  std::shared_ptr<torch::nn::Module> vision_;
  std::shared_ptr<engine::Linear> visual_projection_, text_projection_;
  at::Tensor logit_scale_;
};

/// Images float [N, C, H, W] in [-1, 1] as CLIP's image processor prepares them: grey repeated to three
/// channels, resized (bicubic, antialiased, shorter side to `size`, then centre-cropped to size x size),
/// then normalised by CLIP's mean and standard deviation. (CLIPImageProcessor resizes with PIL's bicubic
/// filter on 8-bit images: the pixels differ from it by a resampling error, not a shift.)
PRIVDIFF_SDK_API at::Tensor clip_pixel_values(const at::Tensor& images, std::int64_t size);

}  // namespace privdiff::sdk::text_encoders
