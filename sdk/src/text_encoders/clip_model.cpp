#include <privdiff/text_encoders/clip_model.hpp>

#include "clip_layers.hpp"

#include <privdiff/io/json_error.hpp>

#include <torch/nn/modules/container/modulelist.h>

#include <stdexcept>
#include <vector>

namespace privdiff::sdk::text_encoders {
namespace {

// vision_model: embeddings (class_embedding, patch_embedding, position_embedding), pre_layrnorm (sic,
// transformers' name), encoder.layers.I, post_layernorm.
class VisionTransformer : public torch::nn::Module {
 public:
  explicit VisionTransformer(const ClipVisionConfig& c) {
    auto embeddings = register_module("embeddings", std::make_shared<torch::nn::Module>());
    class_embedding = embeddings->register_parameter("class_embedding", at::randn({c.hidden_size}));
    patches = embeddings->register_module(
        "patch_embedding", std::make_shared<engine::Conv2d>(engine::Conv2dOptions{
                               c.num_channels, c.hidden_size, {c.patch_size, c.patch_size}, {c.patch_size, c.patch_size},
                               {0, 0}, {1, 1}, 1, false}));
    const std::int64_t grid = c.image_size / c.patch_size;
    positions = embeddings->register_module("position_embedding", std::make_shared<Embedding>(grid * grid + 1, c.hidden_size));
    pre_norm = register_module("pre_layrnorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
    auto list = register_module("encoder", std::make_shared<torch::nn::Module>())
                    ->register_module("layers", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < c.layers; ++i) {
      layers.push_back(std::make_shared<ClipLayer>(
          ClipLayerShape{c.hidden_size, c.heads, c.intermediate_size, c.layer_norm_eps, c.quick_gelu}));
      list->push_back(layers.back());
    }
    post_norm = register_module("post_layernorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
  }
  // The pooled output: the CLS position after the layers, post_layernorm'd.
  at::Tensor pooled(const at::Tensor& pixel_values) {
    const at::Tensor p = patches->forward(pixel_values.to(class_embedding.scalar_type()));  // [N, D, g, g]
    const std::int64_t n = p.size(0), d = p.size(1);
    const at::Tensor tokens = at::cat({class_embedding.reshape({1, 1, d}).expand({n, 1, d}), p.flatten(2).transpose(1, 2)}, 1);
    const at::Tensor ids = at::arange(tokens.size(1), at::TensorOptions(at::kLong).device(p.device())).expand({n, tokens.size(1)});
    at::Tensor x = pre_norm->forward(tokens + positions->forward(ids));
    for (const auto& layer : layers) x = layer->forward(x, {});
    return post_norm->forward(x.select(1, 0));
  }
  at::Tensor class_embedding;
  std::shared_ptr<engine::Conv2d> patches;
  std::shared_ptr<Embedding> positions;
  std::shared_ptr<LayerNorm> pre_norm, post_norm;
  std::vector<std::shared_ptr<ClipLayer>> layers;
};

ClipVisionConfig vision_config(const nlohmann::json& j, const std::string& what) {
  ClipVisionConfig c;
  read_encoder_shape(j, c, what);
  c.image_size = positive(j, "image_size", c.image_size, what);
  c.patch_size = positive(j, "patch_size", c.patch_size, what);
  c.num_channels = positive(j, "num_channels", c.num_channels, what);
  if (c.image_size % c.patch_size != 0) {
    throw std::invalid_argument(what + ": patch_size = " + std::to_string(c.patch_size) + " does not divide image_size = " +
                                std::to_string(c.image_size));
  }
  return c;
}

at::Tensor normalised(const at::Tensor& x) { return x / x.norm(2, -1, true); }

}  // namespace

ClipModelConfig clip_model_config(const std::string& json_text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": not valid JSON (" + json_error_text(e) + ")");
  }
  if (!j.is_object() || config_value<std::string>(j, "model_type", "", what) != "clip") {
    throw std::invalid_argument(what + ": not a CLIPModel's config.json (model_type \"clip\", with text_config and "
                                "vision_config)");
  }
  for (const char* part : {"text_config", "vision_config"}) {
    if (!j.contains(part) || !j[part].is_object()) throw std::invalid_argument(what + ": no " + part);
  }
  nlohmann::json text = j["text_config"];
  text["model_type"] = "clip_text_model";  // (a sub-config need not say it)
  ClipModelConfig c;
  c.text = clip_text_config(text.dump(), what + " text_config");
  c.vision = vision_config(j["vision_config"], what + " vision_config");
  c.projection_dim = positive(j, "projection_dim", c.projection_dim, what);
  return c;
}

ClipModel::ClipModel(ClipModelConfig config) : config_(std::move(config)) {
  text_ = std::make_shared<ClipTextModel>(config_.text);
  register_module("text_model", text_->named_children()["text_model"]);  // transformers' names, one level up
  vision_ = register_module("vision_model", std::make_shared<VisionTransformer>(config_.vision));
  visual_projection_ = register_module("visual_projection",
                                       std::make_shared<engine::Linear>(config_.vision.hidden_size, config_.projection_dim, false));
  text_projection_ = register_module("text_projection",
                                     std::make_shared<engine::Linear>(config_.text.hidden_size, config_.projection_dim, false));
  logit_scale_ = register_parameter("logit_scale", at::full({}, 2.6592));
}

at::Tensor ClipModel::image_embeds(const at::Tensor& pixel_values) {
  const auto& v = config_.vision;
  if (pixel_values.dim() != 4 || pixel_values.size(1) != v.num_channels || pixel_values.size(2) != v.image_size ||
      pixel_values.size(3) != v.image_size) {
    throw std::invalid_argument("CLIP image model: pixel values must be [N, " + std::to_string(v.num_channels) + ", " +
                                std::to_string(v.image_size) + ", " + std::to_string(v.image_size) + "]");
  }
  return normalised(visual_projection_->forward(static_cast<VisionTransformer&>(*vision_).pooled(pixel_values)));
}

at::Tensor ClipModel::text_embeds(const at::Tensor& ids) { return normalised(text_projection_->forward(text_->forward(ids).pooled)); }

at::Tensor clip_pixel_values(const at::Tensor& images, std::int64_t size) {
  if (images.dim() != 4 || (images.size(1) != 1 && images.size(1) != 3)) {
    throw std::invalid_argument("CLIP: images must be [N, 1 or 3, H, W]");
  }
  at::Tensor x = ((images.to(at::kFloat) + 1) / 2).clamp(0, 1);
  if (x.size(1) == 1) x = x.expand({x.size(0), 3, x.size(2), x.size(3)});
  const std::int64_t h = x.size(2), w = x.size(3);
  const double scale = static_cast<double>(size) / static_cast<double>(std::min(h, w));
  const std::int64_t rh = std::max<std::int64_t>(size, std::llround(h * scale)), rw = std::max<std::int64_t>(size, std::llround(w * scale));
  x = at::_upsample_bicubic2d_aa(x.contiguous(), {rh, rw}, false).clamp(0, 1);
  x = x.narrow(2, (rh - size) / 2, size).narrow(3, (rw - size) / 2, size);
  const at::Tensor mean = at::tensor({0.48145466, 0.4578275, 0.40821073}, x.options()).reshape({1, 3, 1, 1});
  const at::Tensor std = at::tensor({0.26862954, 0.26130258, 0.27577711}, x.options()).reshape({1, 3, 1, 1});
  return (x - mean) / std;
}

}  // namespace privdiff::sdk::text_encoders
