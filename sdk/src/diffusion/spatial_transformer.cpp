#include <privdiff/diffusion/spatial_transformer.hpp>

#include "multi_head_attention.hpp"
#include "norm_groups.hpp"

#include <ATen/ATen.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::diffusion {

using engine::GroupNorm;
using engine::LayerNorm;
using engine::Linear;

CrossAttention::CrossAttention(std::int64_t query_dim, std::int64_t context_dim, std::int64_t heads,
                               std::int64_t head_dim)
    : heads_(heads) {
  if (heads < 1 || head_dim < 1) throw std::invalid_argument("attention: heads and head_dim must be >= 1");
  const std::int64_t inner = heads * head_dim;
  // As in LDM: no bias on the projections that form q, k and v.
  to_q_ = register_module("to_q", std::make_shared<Linear>(query_dim, inner, false));
  to_k_ = register_module("to_k", std::make_shared<Linear>(context_dim, inner, false));
  to_v_ = register_module("to_v", std::make_shared<Linear>(context_dim, inner, false));
  to_out_ = register_module("to_out", std::make_shared<Linear>(inner, query_dim));
}

at::Tensor CrossAttention::forward(const at::Tensor& x, const at::Tensor& context) {
  return to_out_->forward(multi_head_attention(to_q_->forward(x), to_k_->forward(context), to_v_->forward(context), heads_));
}

GegluFeedForward::GegluFeedForward(std::int64_t dim, std::int64_t mult) {
  proj_ = register_module("proj", std::make_shared<Linear>(dim, 2 * mult * dim));
  out_ = register_module("out", std::make_shared<Linear>(mult * dim, dim));
}

at::Tensor GegluFeedForward::forward(const at::Tensor& x) {
  const auto halves = proj_->forward(x).chunk(2, -1);
  return out_->forward(halves[0] * at::gelu(halves[1]));
}

TransformerBlock::TransformerBlock(std::int64_t dim, std::int64_t context_dim, std::int64_t heads,
                                   std::int64_t head_dim) {
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(dim));
  attn1_ = register_module("attn1", std::make_shared<CrossAttention>(dim, dim, heads, head_dim));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(dim));
  attn2_ = register_module("attn2", std::make_shared<CrossAttention>(dim, context_dim, heads, head_dim));
  norm3_ = register_module("norm3", std::make_shared<LayerNorm>(dim));
  ff_ = register_module("ff", std::make_shared<GegluFeedForward>(dim));
}

at::Tensor TransformerBlock::forward(const at::Tensor& x, const at::Tensor& context) {
  const at::Tensor normed = norm1_->forward(x);
  at::Tensor h = x + attn1_->forward(normed, normed);
  h = h + attn2_->forward(norm2_->forward(h), context);
  return h + ff_->forward(norm3_->forward(h));
}

SpatialTransformer::SpatialTransformer(const SpatialTransformerConfig& c) {
  if (c.depth < 1) throw std::invalid_argument("spatial transformer: depth must be >= 1");
  const std::int64_t inner = c.heads * c.head_dim;
  norm_ = register_module("norm", std::make_shared<GroupNorm>(norm_groups(c.channels), c.channels, 1e-6));
  proj_in_ = register_module("proj_in", std::make_shared<Linear>(c.channels, inner));
  for (std::int64_t i = 0; i < c.depth; ++i) {
    blocks_.push_back(register_module("block" + std::to_string(i),
                                      std::make_shared<TransformerBlock>(inner, c.context_dim, c.heads, c.head_dim)));
  }
  proj_out_ = register_module("proj_out", std::make_shared<Linear>(inner, c.channels));
  torch::NoGradGuard no_grad;  // zero: a new block is the identity (LDM's zero_module)
  proj_out_->weight.zero_();
  proj_out_->bias.zero_();
}

at::Tensor SpatialTransformer::forward(const at::Tensor& x, const at::Tensor& context) {
  const auto n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  at::Tensor tokens = proj_in_->forward(norm_->forward(x).flatten(2).transpose(1, 2));  // [N, HW, inner]
  for (const auto& block : blocks_) tokens = block->forward(tokens, context);
  return x + proj_out_->forward(tokens).transpose(1, 2).reshape({n, c, h, w});
}

}  // namespace privdiff::sdk::diffusion
