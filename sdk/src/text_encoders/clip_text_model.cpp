#include <privdiff/text_encoders/clip_text_model.hpp>

#include "token_ids.hpp"

#include <privdiff/io/json_error.hpp>

#include <nlohmann/json.hpp>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace privdiff::sdk::text_encoders {
namespace {

using engine::Embedding;
using engine::LayerNorm;
using engine::Linear;

// CLIPAttention: softmax(q k^T / sqrt(d) + mask) v per head, q, k, v and the output projected with biases.
class Attention : public torch::nn::Module {
 public:
  Attention(std::int64_t width, std::int64_t heads) : heads_(heads) {
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
    const at::Tensor weights = at::softmax(scores + mask, -1);
    return out_->forward(at::matmul(weights, split(v_->forward(x))).transpose(1, 2).reshape({n, t, heads_ * d}));
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<Linear> q_, k_, v_, out_;
};

class Layer : public torch::nn::Module {
 public:
  explicit Layer(const ClipTextConfig& c) : quick_gelu_(c.quick_gelu) {
    attention_ = register_module("self_attn", std::make_shared<Attention>(c.hidden_size, c.heads));
    norm1_ = register_module("layer_norm1", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
    auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    fc1_ = mlp->register_module("fc1", std::make_shared<Linear>(c.hidden_size, c.intermediate_size));
    fc2_ = mlp->register_module("fc2", std::make_shared<Linear>(c.intermediate_size, c.hidden_size));
    norm2_ = register_module("layer_norm2", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const at::Tensor h = x + attention_->forward(norm1_->forward(x), mask);
    const at::Tensor up = fc1_->forward(norm2_->forward(h));
    const at::Tensor act = quick_gelu_ ? up * at::sigmoid(1.702 * up) : at::gelu(up);
    return h + fc2_->forward(act);
  }

 private:
  bool quick_gelu_;
  std::shared_ptr<Attention> attention_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  std::shared_ptr<Linear> fc1_, fc2_;
};

// text_model: embeddings (token + position), encoder.layers.I, final_layer_norm.
class TextTransformer : public torch::nn::Module {
 public:
  explicit TextTransformer(const ClipTextConfig& c) {
    auto embeddings = register_module("embeddings", std::make_shared<torch::nn::Module>());
    tokens = embeddings->register_module("token_embedding", std::make_shared<Embedding>(c.vocab_size, c.hidden_size));
    positions = embeddings->register_module("position_embedding",
                                            std::make_shared<Embedding>(c.max_position_embeddings, c.hidden_size));
    auto list = register_module("encoder", std::make_shared<torch::nn::Module>())
                    ->register_module("layers", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < c.layers; ++i) {
      layers.push_back(std::make_shared<Layer>(c));
      list->push_back(layers.back());
    }
    final_norm = register_module("final_layer_norm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
  }
  std::shared_ptr<Embedding> tokens, positions;
  std::vector<std::shared_ptr<Layer>> layers;
  std::shared_ptr<LayerNorm> final_norm;
};

// Causal, plus the padding mask when there is one, as additive terms: the dtype's lowest value where a
// position may not be attended to, summed as transformers sums them (to -inf where both mask it).
at::Tensor additive_mask(const at::Tensor& mask, std::int64_t n, std::int64_t t, const at::TensorOptions& options) {
  const double lowest = options.dtype() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                       : std::numeric_limits<float>::lowest();
  at::Tensor causal = at::full({t, t}, lowest, options).triu(1).reshape({1, 1, t, t});
  if (!mask.defined()) return causal;
  const at::Tensor padding = (1 - mask.to(options.dtype())).reshape({n, 1, 1, t}) * lowest;
  return causal + padding;
}

// config.json's `key` (or `fallback` when absent) as T; std::invalid_argument naming the key otherwise.
template <class T>
T read(const nlohmann::json& j, const std::string& key, T fallback, const std::string& what) {
  if (!j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(what + ": " + key + " = " + j.at(key).dump() + ": expected " +
                                (std::is_same_v<T, std::string> ? "a string" : "a number"));
  }
}

std::int64_t positive(const nlohmann::json& j, const std::string& key, std::int64_t fallback, const std::string& what) {
  const std::int64_t v = read<std::int64_t>(j, key, fallback, what);
  if (v <= 0) throw std::invalid_argument(what + ": " + key + " = " + std::to_string(v) + ": expected a positive size");
  return v;
}

}  // namespace

ClipTextConfig clip_text_config(const std::string& json_text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": not valid JSON (" + json_error_text(e) + ")");
  }
  if (!j.is_object()) throw std::invalid_argument(what + ": not a JSON object (a CLIPTextModel's config.json)");
  const std::string type = read<std::string>(j, "model_type", "", what);
  if (type != "clip_text_model")
    throw std::invalid_argument(what + ": model_type is '" + type + "', not 'clip_text_model' (a CLIPTextModel's config.json)");
  ClipTextConfig c;
  c.vocab_size = positive(j, "vocab_size", c.vocab_size, what);
  c.hidden_size = positive(j, "hidden_size", c.hidden_size, what);
  c.intermediate_size = positive(j, "intermediate_size", c.intermediate_size, what);
  c.layers = positive(j, "num_hidden_layers", c.layers, what);
  c.heads = positive(j, "num_attention_heads", c.heads, what);
  c.max_position_embeddings = positive(j, "max_position_embeddings", c.max_position_embeddings, what);
  c.layer_norm_eps = read<double>(j, "layer_norm_eps", c.layer_norm_eps, what);
  if (!(c.layer_norm_eps > 0)) throw std::invalid_argument(what + ": layer_norm_eps must be positive");
  c.eos_token_id = read<std::int64_t>(j, "eos_token_id", c.eos_token_id, what);
  if (c.hidden_size % c.heads != 0)
    throw std::invalid_argument(what + ": num_attention_heads = " + std::to_string(c.heads) +
                                " does not divide hidden_size = " + std::to_string(c.hidden_size));
  const std::string act = read<std::string>(j, "hidden_act", "quick_gelu", what);
  if (act != "quick_gelu" && act != "gelu")
    throw std::invalid_argument(what + ": hidden_act = '" + act + "' is not supported (quick_gelu or gelu)");
  c.quick_gelu = act == "quick_gelu";
  return c;
}

ClipTextModel::ClipTextModel(ClipTextConfig config) : config_(config) {
  text_model_ = register_module("text_model", std::make_shared<TextTransformer>(config_));
}

ClipTextOutput ClipTextModel::forward(const at::Tensor& ids, const at::Tensor& mask) {
  auto& m = static_cast<TextTransformer&>(*text_model_);
  check_token_ids(ids, config_.max_position_embeddings, config_.vocab_size, "CLIP text model");
  const std::int64_t n = ids.size(0), t = ids.size(1);
  const at::Tensor positions = at::arange(t, ids.options()).expand({n, t});  // per example, for the engine
  at::Tensor x = m.tokens->forward(ids) + m.positions->forward(positions);
  const at::Tensor additive = additive_mask(mask, n, t, x.options());
  for (const auto& layer : m.layers) x = layer->forward(x, additive);
  ClipTextOutput out;
  out.last_hidden_state = m.final_norm->forward(x);
  const at::Tensor eos = config_.eos_token_id == 2 ? ids.argmax(-1) : (ids == config_.eos_token_id).to(at::kInt).argmax(-1);
  out.pooled = out.last_hidden_state.index({at::arange(n, ids.options()), eos});
  return out;
}

}  // namespace privdiff::sdk::text_encoders
