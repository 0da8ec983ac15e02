#include <privdiff/text_encoders/clip_text_model.hpp>

#include "clip_layers.hpp"
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
      layers.push_back(std::make_shared<ClipLayer>(ClipLayerShape{c.hidden_size, c.heads, c.intermediate_size, c.layer_norm_eps, c.quick_gelu}));
      list->push_back(layers.back());
    }
    final_norm = register_module("final_layer_norm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps));
  }
  std::shared_ptr<Embedding> tokens, positions;
  std::vector<std::shared_ptr<ClipLayer>> layers;
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

}  // namespace

ClipTextConfig clip_text_config(const std::string& json_text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": not valid JSON (" + json_error_text(e) + ")");
  }
  if (!j.is_object()) throw std::invalid_argument(what + ": not a JSON object (a CLIPTextModel's config.json)");
  const std::string type = config_value<std::string>(j, "model_type", "", what);
  if (type != "clip_text_model")
    throw std::invalid_argument(what + ": model_type is '" + type + "', not 'clip_text_model' (a CLIPTextModel's config.json)");
  ClipTextConfig c;
  c.vocab_size = positive(j, "vocab_size", c.vocab_size, what);
  read_encoder_shape(j, c, what);
  c.max_position_embeddings = positive(j, "max_position_embeddings", c.max_position_embeddings, what);
  c.eos_token_id = config_value<std::int64_t>(j, "eos_token_id", c.eos_token_id, what);
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
