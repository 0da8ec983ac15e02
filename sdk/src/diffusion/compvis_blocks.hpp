#pragma once
// The building blocks of CompVis's latent diffusion models (internal to the SDK), from privdiff's
// per-example layers under CompVis's own names: openaimodel's ResBlock, SpatialTransformer and
// legacy AttentionBlock for the UNet, and model.py's ResnetBlock and AttnBlock for the KL
// autoencoder. Sequential children keep their indices as names (in_layers.0, in_layers.2, ...).

#include "multi_head_attention.hpp"
#include "padded_conv.hpp"

#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk::diffusion::compvis {

using engine::Conv2d;
using engine::GroupNorm;
using engine::LayerNorm;
using engine::Linear;

// A module holding children under the names given (a Sequential's indices).
inline std::shared_ptr<torch::nn::Module> named(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

inline at::Tensor nearest_up(const at::Tensor& x) { return at::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)}); }

// openaimodel.ResBlock: GroupNorm32, SiLU, [resample], conv; the embedding projected (to a scale and
// a shift of the second norm with use_scale_shift_norm, else added); GroupNorm32, SiLU, dropout, conv;
// plus the input (through a 1x1 conv when the width changes).
class ResBlock : public torch::nn::Module {
 public:
  ResBlock(std::int64_t in, std::int64_t out, std::int64_t emb, bool scale_shift, int resample, double dropout)
      : scale_shift_(scale_shift), resample_(resample), dropout_(dropout) {
    auto in_layers = named(*this, "in_layers");
    in_norm_ = in_layers->register_module("0", std::make_shared<GroupNorm>(32, in));
    in_conv_ = in_layers->register_module("2", padded_conv(in, out, 3));
    emb_ = named(*this, "emb_layers")->register_module("1", std::make_shared<Linear>(emb, scale_shift ? 2 * out : out));
    auto out_layers = named(*this, "out_layers");
    out_norm_ = out_layers->register_module("0", std::make_shared<GroupNorm>(32, out));
    out_conv_ = out_layers->register_module("3", padded_conv(out, out, 3));
    if (in != out) skip_ = register_module("skip_connection", padded_conv(in, out, 1));
  }
  at::Tensor forward(at::Tensor x, const at::Tensor& emb) {
    at::Tensor h = at::silu(in_norm_->forward(x));
    if (resample_ != 0) {
      h = resampled(h);
      x = resampled(x);
    }
    h = in_conv_->forward(h);
    const at::Tensor e = emb_->forward(at::silu(emb)).unsqueeze(-1).unsqueeze(-1);
    if (scale_shift_) {
      const auto parts = e.chunk(2, 1);
      h = out_norm_->forward(h) * (1 + parts[0]) + parts[1];
    } else {
      h = out_norm_->forward(h + e);
    }
    h = out_conv_->forward(at::dropout(at::silu(h), dropout_, is_training() && dropout_ > 0));
    return (skip_ ? skip_->forward(x) : x) + h;
  }

 private:
  at::Tensor resampled(const at::Tensor& x) const { return resample_ > 0 ? nearest_up(x) : at::avg_pool2d(x, {2, 2}); }
  bool scale_shift_;
  int resample_;
  double dropout_;
  std::shared_ptr<GroupNorm> in_norm_, out_norm_;
  std::shared_ptr<Conv2d> in_conv_, out_conv_, skip_;
  std::shared_ptr<Linear> emb_;
};

// attention.CrossAttention: heads of softmax(q k^T / sqrt(head_dim)) v to the context (x itself for
// self-attention); to_q, to_k, to_v without bias, to_out.0.
class CrossAttention : public torch::nn::Module {
 public:
  CrossAttention(std::int64_t dim, std::int64_t context_dim, std::int64_t heads, std::int64_t head_dim)
      : heads_(heads) {
    const std::int64_t inner = heads * head_dim;
    to_q_ = register_module("to_q", std::make_shared<Linear>(dim, inner, false));
    to_k_ = register_module("to_k", std::make_shared<Linear>(context_dim, inner, false));
    to_v_ = register_module("to_v", std::make_shared<Linear>(context_dim, inner, false));
    out_ = named(*this, "to_out")->register_module("0", std::make_shared<Linear>(inner, dim));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& context) {
    const at::Tensor& c = context.defined() ? context : x;
    return out_->forward(multi_head_attention(to_q_->forward(x), to_k_->forward(c), to_v_->forward(c), heads_));
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<Linear> to_q_, to_k_, to_v_, out_;
};

// attention.BasicTransformerBlock: x + attn1(norm1 x); x + attn2(norm2 x, context); x + ff(norm3 x),
// the feed-forward a GEGLU (ff.net.0.proj) then ff.net.2.
class TransformerBlock : public torch::nn::Module {
 public:
  TransformerBlock(std::int64_t dim, std::int64_t context_dim, std::int64_t heads, std::int64_t head_dim) {
    attn1_ = register_module("attn1", std::make_shared<CrossAttention>(dim, dim, heads, head_dim));
    auto net = named(*named(*this, "ff"), "net");
    geglu_ = named(*net, "0")->register_module("proj", std::make_shared<Linear>(dim, 8 * dim));
    ff_out_ = net->register_module("2", std::make_shared<Linear>(4 * dim, dim));
    attn2_ = register_module("attn2", std::make_shared<CrossAttention>(dim, context_dim, heads, head_dim));
    norm1_ = register_module("norm1", std::make_shared<LayerNorm>(dim));
    norm2_ = register_module("norm2", std::make_shared<LayerNorm>(dim));
    norm3_ = register_module("norm3", std::make_shared<LayerNorm>(dim));
  }
  at::Tensor forward(at::Tensor x, const at::Tensor& context) {
    x = attn1_->forward(norm1_->forward(x), {}) + x;
    x = attn2_->forward(norm2_->forward(x), context) + x;
    const auto halves = geglu_->forward(norm3_->forward(x)).chunk(2, -1);
    return ff_out_->forward(halves[0] * at::gelu(halves[1])) + x;
  }

 private:
  std::shared_ptr<CrossAttention> attn1_, attn2_;
  std::shared_ptr<Linear> geglu_, ff_out_;
  std::shared_ptr<LayerNorm> norm1_, norm2_, norm3_;
};

// attention.SpatialTransformer: GroupNorm (32 groups unless told, eps 1e-6), a 1x1 conv to tokens, the
// transformer blocks, a 1x1 conv back, plus the input. diffusers' Transformer2DModel has the same
// names; with use_linear_projection (SD 2.x) its projections are Linear layers on the tokens.
class SpatialTransformer : public torch::nn::Module {
 public:
  SpatialTransformer(std::int64_t channels, std::int64_t heads, std::int64_t head_dim, std::int64_t depth,
                     std::int64_t context_dim, std::int64_t groups = 32, bool linear_projection = false) {
    const std::int64_t inner = heads * head_dim;
    norm_ = register_module("norm", std::make_shared<GroupNorm>(groups, channels, 1e-6));
    if (linear_projection) linear_in_ = register_module("proj_in", std::make_shared<Linear>(channels, inner));
    else proj_in_ = register_module("proj_in", padded_conv(channels, inner, 1));
    auto list = register_module("transformer_blocks", torch::nn::ModuleList());
    for (std::int64_t d = 0; d < depth; ++d) {
      blocks_.push_back(std::make_shared<TransformerBlock>(inner, context_dim, heads, head_dim));
      list->push_back(blocks_.back());
    }
    if (linear_projection) linear_out_ = register_module("proj_out", std::make_shared<Linear>(inner, channels));
    else proj_out_ = register_module("proj_out", padded_conv(inner, channels, 1));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& context) {
    const std::int64_t b = x.size(0), h = x.size(2), w = x.size(3);
    auto tokens = [&](const at::Tensor& map) { return map.reshape({b, map.size(1), h * w}).transpose(1, 2); };
    at::Tensor t = linear_in_ ? linear_in_->forward(tokens(norm_->forward(x))) : tokens(proj_in_->forward(norm_->forward(x)));
    for (auto& block : blocks_) t = block->forward(t, context);
    if (linear_out_) t = linear_out_->forward(t);
    const at::Tensor map = t.transpose(1, 2).reshape({b, t.size(2), h, w});
    return (linear_out_ ? map : proj_out_->forward(map)) + x;
  }

 private:
  std::shared_ptr<GroupNorm> norm_;
  std::shared_ptr<Conv2d> proj_in_, proj_out_;
  std::shared_ptr<Linear> linear_in_, linear_out_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
};

// openaimodel.AttentionBlock with QKVAttentionLegacy: GroupNorm32, one 1x1 projection to q, k, v
// laid out head by head ([head][q|k|v][channel]), softmax((q k^T) / sqrt(head width)), a 1x1
// projection out, plus the input. CompVis's 1x1 Conv1d weights [C', C, 1] load into the Linear
// layers here as [C', C] (the loader drops trailing unit dimensions).
class LegacyAttention : public torch::nn::Module {
 public:
  LegacyAttention(std::int64_t channels, std::int64_t heads) : heads_(heads) {
    norm_ = register_module("norm", std::make_shared<GroupNorm>(32, channels));
    qkv_ = register_module("qkv", std::make_shared<Linear>(channels, 3 * channels));
    proj_out_ = register_module("proj_out", std::make_shared<Linear>(channels, channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    const std::int64_t b = x.size(0), c = x.size(1), t = x.size(2) * x.size(3);
    const at::Tensor tokens = norm_->forward(x).reshape({b, c, t}).transpose(1, 2);  // [B, T, C]
    const at::Tensor qkv = qkv_->forward(tokens).reshape({b, t, heads_, 3, c / heads_});
    auto part = [&](std::int64_t i) { return qkv.select(3, i).reshape({b, t, c}); };  // heads side by side
    const at::Tensor mixed = multi_head_attention(part(0), part(1), part(2), heads_);
    return x + proj_out_->forward(mixed).transpose(1, 2).reshape(x.sizes());
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<GroupNorm> norm_;
  std::shared_ptr<Linear> qkv_, proj_out_;
};

// model.py ResnetBlock of the autoencoder (no time embedding): GroupNorm (32, eps 1e-6), swish,
// conv, GroupNorm, swish, conv, plus the input (through nin_shortcut when the width changes).
class AutoencoderResnet : public torch::nn::Module {
 public:
  AutoencoderResnet(std::int64_t in, std::int64_t out) {
    norm1_ = register_module("norm1", std::make_shared<GroupNorm>(32, in, 1e-6));
    conv1_ = register_module("conv1", padded_conv(in, out, 3));
    norm2_ = register_module("norm2", std::make_shared<GroupNorm>(32, out, 1e-6));
    conv2_ = register_module("conv2", padded_conv(out, out, 3));
    if (in != out) shortcut_ = register_module("nin_shortcut", padded_conv(in, out, 1));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = conv2_->forward(at::silu(norm2_->forward(conv1_->forward(at::silu(norm1_->forward(x))))));
    return (shortcut_ ? shortcut_->forward(x) : x) + h;
  }

 private:
  std::shared_ptr<GroupNorm> norm1_, norm2_;
  std::shared_ptr<Conv2d> conv1_, conv2_, shortcut_;
};

// model.py AttnBlock: single-head self-attention over the positions with 1x1 convolutions q, k, v
// and proj_out, plus the input.
class AutoencoderAttention : public torch::nn::Module {
 public:
  explicit AutoencoderAttention(std::int64_t channels) {
    norm_ = register_module("norm", std::make_shared<GroupNorm>(32, channels, 1e-6));
    q_ = register_module("q", padded_conv(channels, channels, 1));
    k_ = register_module("k", padded_conv(channels, channels, 1));
    v_ = register_module("v", padded_conv(channels, channels, 1));
    proj_out_ = register_module("proj_out", padded_conv(channels, channels, 1));
  }
  at::Tensor forward(const at::Tensor& x) {
    const std::int64_t b = x.size(0), c = x.size(1), t = x.size(2) * x.size(3);
    const at::Tensor h = norm_->forward(x);
    auto tokens = [&](Conv2d& projection) { return projection.forward(h).reshape({b, c, t}).transpose(1, 2); };  // [B, T, C]
    const at::Tensor mixed = multi_head_attention(tokens(*q_), tokens(*k_), tokens(*v_), 1);
    return x + proj_out_->forward(mixed.transpose(1, 2).reshape(x.sizes()));
  }

 private:
  std::shared_ptr<GroupNorm> norm_;
  std::shared_ptr<Conv2d> q_, k_, v_, proj_out_;
};

}  // namespace privdiff::sdk::diffusion::compvis
