#pragma once
/// @file
/// CompVisBertEmbedder: CompVis's BERTEmbedder / TransformerEmbedder (ldm/modules/encoders/modules.py),
/// the text encoder of the LDM txt2img models and of DP-LDM's text-to-image row: token and absolute
/// position embeddings, `layers` pre-norm blocks of the vendored x-transformers Encoder (self-attention of
/// `heads` heads of 64 without biases but the output's, then a GELU feed-forward 4x wide), a final
/// LayerNorm; the caption's [N, T, width] embeddings are what the UNet's cross-attention reads. Under
/// CompVis's parameter names below `transformer.` (token_emb, pos_emb.emb, attn_layers.layers.I.0 the
/// norm, .1 the block), so a checkpoint's cond_stage_model.* loads by name. Its to_logits head, in every
/// checkpoint but unused by the embedder, is held as buffers: loaded and exported, never trained or
/// noised. Its layers are the engine's: DP-LDM trains it
/// under DP-SGD with the UNet's SpatialTransformers.

#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace privdiff::sdk::text_encoders {

struct CompVisBertConfig {
  std::int64_t vocab_size = 30522;  ///< bert-base-uncased's
  std::int64_t width = 1280;        ///< n_embed (txt2img-1p4B's)
  std::int64_t layers = 32;         ///< n_layer
  std::int64_t max_seq_len = 77;
  std::int64_t heads = 8, head_dim = 64;  ///< the Encoder's defaults, whatever the width
};

class PRIVDIFF_SDK_API CompVisBertEmbedder : public torch::nn::Module {
 public:
  /// std::invalid_argument for a size that is not positive.
  explicit CompVisBertEmbedder(CompVisBertConfig config);
  /// `ids` int64 [N, T], T ≤ max_seq_len (the tokenizer's 77): [N, T, width]. No mask, as CompVis's.
  at::Tensor forward(const at::Tensor& ids);
  const CompVisBertConfig& config() const { return config_; }

 private:
  CompVisBertConfig config_;
  std::shared_ptr<engine::Embedding> tokens_, positions_;
  std::vector<std::shared_ptr<torch::nn::Module>> blocks_;
  std::shared_ptr<engine::LayerNorm> norm_;
};

}  // namespace privdiff::sdk::text_encoders
