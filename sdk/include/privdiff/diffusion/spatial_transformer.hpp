#pragma once
/// @file
/// The transformer block of latent diffusion models (LDM's SpatialTransformer, which DP-LDM
/// fine-tunes): GroupNorm, a linear projection of the feature map to tokens, `depth` transformer
/// blocks — self-attention, cross-attention to a context (e.g. the class embedding), a GEGLU
/// feed-forward, each after a LayerNorm and with a residual — and a zero-initialised projection back
/// (so a new block starts as the identity). Built only from per-example layers (Linear, LayerNorm,
/// GroupNorm), so its per-example gradients and fast gradient clipping come in closed form.

#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace privdiff::sdk::diffusion {

/// Multi-head attention of queries x [N, L, query_dim] to a context [N, M, context_dim] (x itself
/// for self-attention): softmax(q k^T / sqrt(head_dim)) v, heads concatenated, then to_out.
class PRIVDIFF_SDK_API CrossAttention : public torch::nn::Module {
 public:
  CrossAttention(std::int64_t query_dim, std::int64_t context_dim, std::int64_t heads, std::int64_t head_dim);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& context);

 private:
  std::int64_t heads_;
  std::shared_ptr<engine::Linear> to_q_, to_k_, to_v_, to_out_;
};

/// GEGLU feed-forward: Linear(dim, 2 inner) split into (value, gate), value * gelu(gate),
/// Linear(inner, dim).
class PRIVDIFF_SDK_API GegluFeedForward : public torch::nn::Module {
 public:
  GegluFeedForward(std::int64_t dim, std::int64_t mult = 4);
  at::Tensor forward(const at::Tensor& x);

 private:
  std::shared_ptr<engine::Linear> proj_, out_;
};

/// x + attn1(norm1 x); x + attn2(norm2 x, context); x + ff(norm3 x).
class PRIVDIFF_SDK_API TransformerBlock : public torch::nn::Module {
 public:
  TransformerBlock(std::int64_t dim, std::int64_t context_dim, std::int64_t heads, std::int64_t head_dim);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& context);

 private:
  std::shared_ptr<engine::LayerNorm> norm1_, norm2_, norm3_;
  std::shared_ptr<CrossAttention> attn1_, attn2_;
  std::shared_ptr<GegluFeedForward> ff_;
};

struct SpatialTransformerConfig {
  std::int64_t channels = 64;     ///< of the feature map
  std::int64_t heads = 4;
  std::int64_t head_dim = 16;     ///< inner width = heads * head_dim
  std::int64_t depth = 1;         ///< transformer blocks
  std::int64_t context_dim = 64;  ///< width of the context tokens
};

/// x [N, C, H, W], context [N, M, context_dim] -> x + proj_out(blocks(proj_in(norm x))).
class PRIVDIFF_SDK_API SpatialTransformer : public torch::nn::Module {
 public:
  explicit SpatialTransformer(const SpatialTransformerConfig& config);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& context);

 private:
  std::shared_ptr<engine::GroupNorm> norm_;
  std::shared_ptr<engine::Linear> proj_in_, proj_out_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
};

}  // namespace privdiff::sdk::diffusion
