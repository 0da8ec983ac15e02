#include <privdiff/diffusion/unet.hpp>

#include <privdiff/diffusion/spatial_transformer.hpp>

#include "multi_head_attention.hpp"
#include "padded_conv.hpp"

#include <ATen/ATen.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

using engine::Conv2d;
using engine::GroupNorm;
using engine::Linear;

namespace {
std::int64_t groups_for(std::int64_t channels) { return std::max<std::int64_t>(1, std::min<std::int64_t>(32, channels / 4)); }
}  // namespace

class ResidualBlock : public torch::nn::Module {
 public:
  ResidualBlock(std::int64_t in, std::int64_t out, std::int64_t emb_dim, double dropout) : dropout_(dropout) {
    norm1_ = register_module("norm1", std::make_shared<GroupNorm>(groups_for(in), in));
    conv1_ = register_module("conv1", padded_conv(in, out, 3));
    emb_ = register_module("emb", std::make_shared<Linear>(emb_dim, out));
    norm2_ = register_module("norm2", std::make_shared<GroupNorm>(groups_for(out), out));
    conv2_ = register_module("conv2", padded_conv(out, out, 3));
    if (in != out) skip_ = register_module("skip", padded_conv(in, out, 1));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& emb) {
    at::Tensor h = conv1_->forward(at::silu(norm1_->forward(x)));
    h = h + emb_->forward(at::silu(emb)).unsqueeze(-1).unsqueeze(-1);
    h = at::silu(norm2_->forward(h));
    if (dropout_ > 0 && is_training()) h = at::dropout(h, dropout_, true);
    h = conv2_->forward(h);
    return ((skip_ ? skip_->forward(x) : x) + h) / std::sqrt(2.0);
  }

 private:
  double dropout_;
  std::shared_ptr<GroupNorm> norm1_, norm2_;
  std::shared_ptr<Conv2d> conv1_, conv2_, skip_;
  std::shared_ptr<Linear> emb_;
};

class AttentionBlock : public torch::nn::Module {
 public:
  explicit AttentionBlock(std::int64_t channels) {
    norm_ = register_module("norm", std::make_shared<GroupNorm>(groups_for(channels), channels));
    qkv_ = register_module("qkv", std::make_shared<Linear>(channels, 3 * channels));
    proj_ = register_module("proj", std::make_shared<Linear>(channels, channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    const auto n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const at::Tensor tokens = norm_->forward(x).flatten(2).transpose(1, 2);  // [N, HW, C]
    const auto qkv = qkv_->forward(tokens).chunk(3, -1);
    const at::Tensor out = proj_->forward(multi_head_attention(qkv[0], qkv[1], qkv[2], 1)).transpose(1, 2).reshape({n, c, h, w});
    return (x + out) / std::sqrt(2.0);
  }

 private:
  std::shared_ptr<GroupNorm> norm_;
  std::shared_ptr<Linear> qkv_, proj_;
};

Unet::Unet(UnetConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  if (c.channel_mult.empty()) throw std::invalid_argument("channel_mult: give at least one level");
  const std::int64_t nf = c.channels, emb = 4 * nf;
  sigma_mlp1_ = register_module("sigma_mlp1", std::make_shared<Linear>(nf, emb));
  sigma_mlp2_ = register_module("sigma_mlp2", std::make_shared<Linear>(emb, emb));
  const bool transformers = c.transformer_heads > 0;
  if (c.text_context && (!transformers || c.num_classes > 0)) {
    throw std::invalid_argument("a UNet on text cross-attends to the caption with SpatialTransformers (transformer_heads "
                                "> 0) and has no class embedding (num_classes = 0)");
  }
  if (transformers && c.num_classes <= 0 && !c.text_context) {
    throw std::invalid_argument("transformer attention cross-attends to the class embedding: it needs num_classes > 0 "
                                "(an unconditional model uses self-attention blocks)");
  }
  const std::int64_t context_dim = c.context_dim > 0 ? c.context_dim : emb;
  if (c.num_classes > 0) {
    class_embedding_ = register_module(
        "class_embedding", std::make_shared<engine::Embedding>(c.num_classes + 1, transformers ? context_dim : emb));
  }
  auto transformer = [&](std::int64_t channels) {
    // head_dim 0: LDM's num_head_channels = -1, the block's channels split over the heads
    const std::int64_t head_dim = c.transformer_head_dim > 0 ? c.transformer_head_dim
                                                             : std::max<std::int64_t>(1, channels / c.transformer_heads);
    return std::make_shared<SpatialTransformer>(
        SpatialTransformerConfig{channels, c.transformer_heads, head_dim, c.transformer_depth, context_dim});
  };
  conv_in_ = register_module("conv_in", padded_conv(c.image_channels, nf, 3));
  roles_ = {{"sigma_mlp", {"embedding", -1}}, {"class_embedding", {"conditioning", -1}}, {"conv_in", {"io", -1}}};

  auto has_attention = [&](std::int64_t resolution) {
    return std::find(c.attention_resolutions.begin(), c.attention_resolutions.end(), resolution) != c.attention_resolutions.end();
  };
  int block = 0;
  auto name_block = [&](const std::string& name, bool attention) {
    roles_.push_back({name, {attention ? "attention" : "resblock", block++}});
  };
  // A residual block (and an attention block at the attention resolutions) appended to a stage.
  auto add_block = [&](Stage& stage, const std::string& prefix, std::int64_t b, std::int64_t in, std::int64_t out,
                       std::int64_t at_resolution) {
    const std::string name = prefix + "_res" + std::to_string(b);
    stage.blocks.push_back(register_module(name, std::make_shared<ResidualBlock>(in, out, emb, c.dropout)));
    name_block(name, false);
    std::shared_ptr<AttentionBlock> attention;
    std::shared_ptr<SpatialTransformer> spatial;
    if (has_attention(at_resolution)) {
      const std::string aname = prefix + "_attn" + std::to_string(b);
      if (transformers) {
        spatial = register_module(aname, transformer(out));
      } else {
        attention = register_module(aname, std::make_shared<AttentionBlock>(out));
      }
      name_block(aname, true);
    }
    stage.attention.push_back(attention);
    stage.transformers.push_back(spatial);
  };
  std::vector<std::int64_t> skip_channels{nf};
  std::vector<std::int64_t> level_resolution;
  std::int64_t ch = nf, resolution = c.image_size;
  for (std::size_t level = 0; level < c.channel_mult.size(); ++level) {
    Stage stage;
    level_resolution.push_back(resolution);
    const std::int64_t out = nf * c.channel_mult[level];
    for (std::int64_t b = 0; b < c.num_res_blocks; ++b) {
      add_block(stage, "down" + std::to_string(level), b, ch, out, resolution);
      ch = out;
      skip_channels.push_back(ch);
    }
    if (level + 1 < c.channel_mult.size()) {
      const std::string name = "down" + std::to_string(level) + "_downsample";
      stage.resample = register_module(name, padded_conv(ch, ch, 3, 2));
      name_block(name, false);
      skip_channels.push_back(ch);
      resolution = (resolution + 1) / 2;
    }
    down_.push_back(std::move(stage));
  }
  mid1_ = register_module("mid_res0", std::make_shared<ResidualBlock>(ch, ch, emb, c.dropout));
  name_block("mid_res0", false);
  if (transformers) {
    mid_transformer_ = register_module("mid_attn", transformer(ch));
  } else {
    mid_attention_ = register_module("mid_attn", std::make_shared<AttentionBlock>(ch));
  }
  name_block("mid_attn", true);
  mid2_ = register_module("mid_res1", std::make_shared<ResidualBlock>(ch, ch, emb, c.dropout));
  name_block("mid_res1", false);
  for (std::size_t r = 0; r < c.channel_mult.size(); ++r) {
    const std::size_t level = c.channel_mult.size() - 1 - r;
    resolution = level_resolution[level];
    Stage stage;
    const std::int64_t out = nf * c.channel_mult[level];
    for (std::int64_t b = 0; b <= c.num_res_blocks; ++b) {
      add_block(stage, "up" + std::to_string(level), b, ch + skip_channels.back(), out, resolution);
      skip_channels.pop_back();
      ch = out;
    }
    if (level > 0) {
      const std::string name = "up" + std::to_string(level) + "_upsample";
      stage.resample = register_module(name, padded_conv(ch, ch, 3));
      name_block(name, false);
    }
    up_.push_back(std::move(stage));
  }
  norm_out_ = register_module("norm_out", std::make_shared<GroupNorm>(groups_for(ch), ch));
  conv_out_ = register_module("conv_out", padded_conv(ch, c.image_channels, 3));
  roles_.push_back({"norm_out", {"io", -1}});
  roles_.push_back({"conv_out", {"io", -1}});
}

Unet::~Unet() = default;

at::Tensor Unet::forward(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels) {
  return forward(x, c_noise, labels, {});
}

at::Tensor Unet::forward(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels,
                         const at::Tensor& text_context) {
  if (config_.text_context && (!text_context.defined() || text_context.dim() != 3 || text_context.size(0) != x.size(0))) {
    throw std::invalid_argument("Unet: a UNet on text needs the caption embeddings [N, T, context_dim], one per row");
  }
  const std::int64_t nf = config_.channels, half = nf / 2;
  // Sinusoidal embedding of the noise level.
  const at::Tensor freqs = at::exp(-std::log(10000.0) * at::arange(half, x.options()) / half);
  const at::Tensor args = c_noise.to(x.scalar_type()).unsqueeze(1) * freqs.unsqueeze(0);
  at::Tensor emb = at::cat({at::sin(args), at::cos(args)}, 1);
  emb = sigma_mlp2_->forward(at::silu(sigma_mlp1_->forward(emb)));
  // Transformer mode: the class embedding as one context token [N, 1, context_dim], or the caption's.
  at::Tensor context = config_.text_context ? text_context : at::Tensor();
  if (class_embedding_) {
    const at::Tensor l = labels.defined() ? labels : at::full({x.size(0)}, config_.num_classes, at::kLong);
    const at::Tensor class_emb = class_embedding_->forward(l.to(at::kLong).to(x.device()));
    if (config_.transformer_heads > 0) {
      context = class_emb.unsqueeze(1);
    } else {
      emb = emb + class_emb;
    }
  }
  auto attend = [&](const Stage& stage, std::size_t b, const at::Tensor& h) {
    if (stage.attention[b]) return stage.attention[b]->forward(h);
    if (stage.transformers[b]) return stage.transformers[b]->forward(h, context);
    return h;
  };
  std::vector<at::Tensor> skips;
  at::Tensor h = conv_in_->forward(x);
  skips.push_back(h);
  for (auto& stage : down_) {
    for (std::size_t b = 0; b < stage.blocks.size(); ++b) {
      h = attend(stage, b, stage.blocks[b]->forward(h, emb));
      skips.push_back(h);
    }
    if (stage.resample) {
      h = stage.resample->forward(h);
      skips.push_back(h);
    }
  }
  h = mid1_->forward(h, emb);
  h = mid_attention_ ? mid_attention_->forward(h) : mid_transformer_->forward(h, context);
  h = mid2_->forward(h, emb);
  for (auto& stage : up_) {
    for (std::size_t b = 0; b < stage.blocks.size(); ++b) {
      h = stage.blocks[b]->forward(at::cat({h, skips.back()}, 1), emb);
      skips.pop_back();
      h = attend(stage, b, h);
    }
    if (stage.resample) {
      const auto& target = skips.back();  // the resolution of the next level up
      h = stage.resample->forward(at::upsample_nearest2d(h, {target.size(2), target.size(3)}));
    }
  }
  return conv_out_->forward(at::silu(norm_out_->forward(h)));
}

std::vector<ParameterInfo> Unet::parameters_with_roles() {
  std::vector<ParameterInfo> out;
  for (const auto& p : named_parameters()) {
    ParameterInfo info{p.key(), "io", -1, p.value()};
    for (const auto& [prefix, role] : roles_) {
      if (p.key().rfind(prefix, 0) == 0) {
        info.role = role.first;
        info.block_index = role.second;
      }
    }
    // A residual block's noise-embedding projection stays "resblock" (frozen with it, as in
    // DP-LDM); "conditioning" is the class embedding.
    out.push_back(info);
  }
  return out;
}

std::int64_t Unet::parameter_count() {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

Network as_network(Unet& unet) {
  return [&unet](const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels) {
    return unet.forward(x, c_noise, labels);
  };
}

}  // namespace privdiff::sdk::diffusion
