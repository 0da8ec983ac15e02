#pragma once
// The transformer layers CLIP's two towers share (internal to the SDK), on the engine's layers under
// transformers' names: CLIPAttention (self_attn.q_proj, ...) and CLIPEncoderLayer (layer_norm1, mlp.fc1,
// ...); and reading their config.json's sizes. The text model (clip_text_model.cpp) masks causally;
// the vision model (clip_model.cpp) does not.

#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace privdiff::sdk::text_encoders {

using engine::Embedding;
using engine::LayerNorm;
using engine::Linear;

// CLIPAttention: softmax(q k^T / sqrt(d) + mask) v per head, q, k, v and the output projected with biases
// (mask: additive, or undefined for none, as the vision tower).
class ClipAttention : public torch::nn::Module {
 public:
  ClipAttention(std::int64_t width, std::int64_t heads) : heads_(heads) {
    q_ = register_module("q_proj", std::make_shared<Linear>(width, width));
    k_ = register_module("k_proj", std::make_shared<Linear>(width, width));
    v_ = register_module("v_proj", std::make_shared<Linear>(width, width));
    out_ = register_module("out_proj", std::make_shared<Linear>(width, width));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const std::int64_t n = x.size(0), t = x.size(1), d = x.size(2) / heads_;
    auto split = [&](const at::Tensor& y) { return y.reshape({n, t, heads_, d}).transpose(1, 2); };
    const at::Tensor scores = at::matmul(split(q_->forward(x)), split(k_->forward(x)).transpose(-1, -2)) *
                              (1.0 / std::sqrt(static_cast<double>(d)));
    const at::Tensor weights = at::softmax(mask.defined() ? scores + mask : scores, -1);
    return out_->forward(at::matmul(weights, split(v_->forward(x))).transpose(1, 2).reshape({n, t, heads_ * d}));
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<Linear> q_, k_, v_, out_;
};

// The sizes of one CLIPEncoderLayer.
struct ClipLayerShape {
  std::int64_t width, heads, intermediate;
  double eps;
  bool quick_gelu;
};

// CLIPEncoderLayer: x + attention(layer_norm1 x), then + fc2(act(fc1(layer_norm2 x))).
class ClipLayer : public torch::nn::Module {
 public:
  explicit ClipLayer(const ClipLayerShape& c) : quick_gelu_(c.quick_gelu) {
    attention_ = register_module("self_attn", std::make_shared<ClipAttention>(c.width, c.heads));
    norm1_ = register_module("layer_norm1", std::make_shared<LayerNorm>(c.width, c.eps));
    auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    fc1_ = mlp->register_module("fc1", std::make_shared<Linear>(c.width, c.intermediate));
    fc2_ = mlp->register_module("fc2", std::make_shared<Linear>(c.intermediate, c.width));
    norm2_ = register_module("layer_norm2", std::make_shared<LayerNorm>(c.width, c.eps));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const at::Tensor h = x + attention_->forward(norm1_->forward(x), mask);
    const at::Tensor up = fc1_->forward(norm2_->forward(h));
    const at::Tensor act = quick_gelu_ ? up * at::sigmoid(1.702 * up) : at::gelu(up);
    return h + fc2_->forward(act);
  }

 private:
  bool quick_gelu_;
  std::shared_ptr<ClipAttention> attention_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  std::shared_ptr<Linear> fc1_, fc2_;
};

// config.json's `key` (or `fallback` when absent) as T; std::invalid_argument naming the key otherwise.
template <class T>
inline T config_value(const nlohmann::json& j, const std::string& key, T fallback, const std::string& what) {
  if (!j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(what + ": " + key + " = " + j.at(key).dump() + ": expected " +
                                (std::is_same_v<T, std::string> ? "a string" : "a number"));
  }
}

inline std::int64_t positive(const nlohmann::json& j, const std::string& key, std::int64_t fallback, const std::string& what) {
  const std::int64_t v = config_value<std::int64_t>(j, key, fallback, what);
  if (v <= 0) throw std::invalid_argument(what + ": " + key + " = " + std::to_string(v) + ": expected a positive size");
  return v;
}

// The encoder's shape, as CLIPTextConfig and CLIPVisionConfig both name it (hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, layer_norm_eps, hidden_act) into `c`
// (a ClipTextConfig or ClipVisionConfig, its values the defaults); std::invalid_argument naming the key.
template <class Config>
void read_encoder_shape(const nlohmann::json& j, Config& c, const std::string& what) {
  c.hidden_size = positive(j, "hidden_size", c.hidden_size, what);
  c.intermediate_size = positive(j, "intermediate_size", c.intermediate_size, what);
  c.layers = positive(j, "num_hidden_layers", c.layers, what);
  c.heads = positive(j, "num_attention_heads", c.heads, what);
  c.layer_norm_eps = config_value<double>(j, "layer_norm_eps", c.layer_norm_eps, what);
  if (!(c.layer_norm_eps > 0)) throw std::invalid_argument(what + ": layer_norm_eps must be positive");
  if (c.hidden_size % c.heads != 0) {
    throw std::invalid_argument(what + ": num_attention_heads = " + std::to_string(c.heads) + " does not divide hidden_size = " +
                                std::to_string(c.hidden_size));
  }
  const std::string act = config_value<std::string>(j, "hidden_act", "quick_gelu", what);
  if (act != "quick_gelu" && act != "gelu") {
    throw std::invalid_argument(what + ": hidden_act = '" + act + "' is not supported (quick_gelu or gelu)");
  }
  c.quick_gelu = act == "quick_gelu";
}

}  // namespace privdiff::sdk::text_encoders
