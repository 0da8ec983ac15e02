#pragma once
/// @file
/// ClipTextModel: transformers' CLIPTextModel (Stable Diffusion's text encoder) on the engine's layers,
/// under transformers' parameter names (text_model.embeddings.token_embedding.weight, …
/// text_model.encoder.layers.I.self_attn.q_proj.weight, … text_model.final_layer_norm.bias), so an SD
/// checkpoint's text_encoder/model.safetensors loads by name (load_pretrained_weights). Pre-norm
/// transformer layers with causal self-attention; the last hidden state is what a UNet's cross-attention
/// reads, the pooled output the <|endoftext|> position's. Its layers are the engine's, so it trains
/// under DP like any model (every layer's per-example gradients, the embeddings' included).

#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk::text_encoders {

struct ClipTextConfig {
  std::int64_t vocab_size = 49408, hidden_size = 512, intermediate_size = 2048;
  std::int64_t layers = 12, heads = 8, max_position_embeddings = 77;
  double layer_norm_eps = 1e-5;
  bool quick_gelu = true;         ///< hidden_act "quick_gelu" (OpenAI's CLIP, SD 1.x), else "gelu" (SD 2.x)
  /// The pooled position: that id's first. 2 is the legacy rule, the highest id is <|endoftext|> (SD 1.x's
  /// configs say 2); transformers' default, for a config.json without it, is 49407.
  std::int64_t eos_token_id = 49407;
};

/// A CLIPTextModel config.json (its text; `what` names it in errors). std::invalid_argument naming the
/// key for what is not a CLIPTextModel, a value of the wrong type, a size that is not positive, heads that
/// do not divide hidden_size, an activation other than quick_gelu and gelu.
PRIVDIFF_SDK_API ClipTextConfig clip_text_config(const std::string& json_text, const std::string& what);

/// What the encoder gives a batch of captions.
struct ClipTextOutput {
  at::Tensor last_hidden_state;  ///< [N, T, hidden], after the final layer norm
  at::Tensor pooled;             ///< [N, hidden], each caption's <|endoftext|> position of it
};

class PRIVDIFF_SDK_API ClipTextModel : public torch::nn::Module {
 public:
  explicit ClipTextModel(ClipTextConfig config);
  /// `ids` [N, T] (int64, T ≤ max_position_embeddings); `mask` [N, T] of 1 (caption) and 0 (padding)
  /// or undefined, as transformers' attention_mask (SD passes none). std::invalid_argument for ids
  /// outside the vocabulary or a T over the positions.
  ClipTextOutput forward(const at::Tensor& ids, const at::Tensor& mask = {});
  const ClipTextConfig& config() const { return config_; }

 private:
  ClipTextConfig config_;
  std::shared_ptr<torch::nn::Module> text_model_;
};

}  // namespace privdiff::sdk::text_encoders
