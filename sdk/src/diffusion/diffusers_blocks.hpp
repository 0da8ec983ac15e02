#pragma once
// The building blocks diffusers' UNet2DModel and AutoencoderKL share (internal to the SDK), from
// privdiff's per-example layers under diffusers' own names: ResnetBlock2D, the self-attention of
// their mid and attention blocks, and Downsample2D / Upsample2D with a convolution.

#include "multi_head_attention.hpp"
#include "padded_conv.hpp"

#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

namespace privdiff::sdk::diffusion {

using engine::Conv2d;
using engine::GroupNorm;
using engine::Linear;

// ResnetBlock2D (time_embedding_norm "default"): GroupNorm, SiLU, conv, + the projected time
// embedding, GroupNorm, SiLU, conv, plus the input (through a 1x1 conv when the width changes).
class DiffusersResnet : public torch::nn::Module {
 public:
  /// temb = 0: no time embedding (an autoencoder's blocks).
  DiffusersResnet(std::int64_t in, std::int64_t out, std::int64_t temb, std::int64_t groups, double eps) {
    norm1_ = register_module("norm1", std::make_shared<GroupNorm>(groups, in, eps));
    conv1_ = register_module("conv1", padded_conv(in, out, 3));
    if (temb > 0) time_emb_proj_ = register_module("time_emb_proj", std::make_shared<Linear>(temb, out));
    norm2_ = register_module("norm2", std::make_shared<GroupNorm>(groups, out, eps));
    conv2_ = register_module("conv2", padded_conv(out, out, 3));
    if (in != out) conv_shortcut_ = register_module("conv_shortcut", padded_conv(in, out, 1));
  }
  /// `temb_act`: SiLU of the time embedding (diffusers applies it in every block; once is enough).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& temb_act = {}) {
    at::Tensor h = conv1_->forward(at::silu(norm1_->forward(x)));
    if (time_emb_proj_) h = h + time_emb_proj_->forward(temb_act).unsqueeze(-1).unsqueeze(-1);
    h = conv2_->forward(at::silu(norm2_->forward(h)));
    return (conv_shortcut_ ? conv_shortcut_->forward(x) : x) + h;
  }

 private:
  std::shared_ptr<GroupNorm> norm1_, norm2_;
  std::shared_ptr<Conv2d> conv1_, conv2_, conv_shortcut_;
  std::shared_ptr<Linear> time_emb_proj_;
};

// Attention as UNet2DModel builds it: GroupNorm over the channels, multi-head self-attention over the
// positions (heads = channels / attention_head_dim), an output projection, plus the input.
class DiffusersAttention : public torch::nn::Module {
 public:
  DiffusersAttention(std::int64_t channels, std::int64_t heads, std::int64_t groups, double eps)
      : heads_(std::max<std::int64_t>(1, heads)) {
    group_norm_ = register_module("group_norm", std::make_shared<GroupNorm>(groups, channels, eps));
    to_q_ = register_module("to_q", std::make_shared<Linear>(channels, channels));
    to_k_ = register_module("to_k", std::make_shared<Linear>(channels, channels));
    to_v_ = register_module("to_v", std::make_shared<Linear>(channels, channels));
    to_out_ = register_module("to_out", torch::nn::ModuleList());
    out_ = std::make_shared<Linear>(channels, channels);
    to_out_->push_back(out_);
  }
  at::Tensor forward(const at::Tensor& x) {
    const std::int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const at::Tensor tokens = group_norm_->forward(x).reshape({b, c, h * w}).transpose(1, 2);  // [B, HW, C]
    const at::Tensor mixed =
        multi_head_attention(to_q_->forward(tokens), to_k_->forward(tokens), to_v_->forward(tokens), heads_);
    return out_->forward(mixed).transpose(1, 2).reshape({b, c, h, w}) + x;
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<GroupNorm> group_norm_;
  std::shared_ptr<Linear> to_q_, to_k_, to_v_, out_;
  torch::nn::ModuleList to_out_;
};

// Downsample2D / Upsample2D with a convolution: diffusers names it "conv" inside the block's list.
// An autoencoder's downsampler pads only right and bottom (downsample_padding 0) before its stride-2
// convolution; the UNet's pads by one on every side.
class DiffusersResampler : public torch::nn::Module {
 public:
  DiffusersResampler(std::int64_t channels, bool down, bool asymmetric_padding = false)
      : down_(down), asymmetric_(asymmetric_padding) {
    conv_ = register_module("conv", padded_conv(channels, channels, 3, down ? 2 : 1, asymmetric_padding ? 0 : 1));
  }
  at::Tensor forward(const at::Tensor& x) {
    if (!down_) return conv_->forward(at::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)}));
    return conv_->forward(asymmetric_ ? at::constant_pad_nd(x, {0, 1, 0, 1}) : x);
  }

 private:
  bool down_, asymmetric_;
  std::shared_ptr<Conv2d> conv_;
};

}  // namespace privdiff::sdk::diffusion
