#include <privdiff/diffusion/ncsnpp.hpp>

#include "multi_head_attention.hpp"
#include "padded_conv.hpp"

#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

using engine::Conv2d;
using engine::GroupNorm;
using engine::Linear;

namespace {

const double ncsnpp_skip_scale = 1 / std::sqrt(2.0);

// score_sde's GroupNorm: min(C / 4, 32) groups, eps 1e-6.
std::shared_ptr<GroupNorm> score_sde_group_norm(std::int64_t channels) {
  return std::make_shared<GroupNorm>(std::min<std::int64_t>(channels / 4, 32), channels, 1e-6);
}

}  // namespace

// ResnetBlockBigGANpp (fir = False): GroupNorm, SiLU, [nearest up / 2x2 mean down of both paths],
// conv, + Dense(SiLU(temb)), GroupNorm, SiLU, dropout, conv; the input through a 1x1 conv when the
// width changes or it resamples; the sum scaled by 1/sqrt(2).
class NcsnppResnetBlock : public torch::nn::Module {
 public:
  NcsnppResnetBlock(std::int64_t in, std::int64_t out, std::int64_t temb, int resample, double dropout)
      : resample_(resample), dropout_(dropout) {
    norm_0_ = register_module("GroupNorm_0", score_sde_group_norm(in));
    conv_0_ = register_module("Conv_0", padded_conv(in, out, 3));
    dense_0_ = register_module("Dense_0", std::make_shared<Linear>(temb, out));
    norm_1_ = register_module("GroupNorm_1", score_sde_group_norm(out));
    conv_1_ = register_module("Conv_1", padded_conv(out, out, 3));
    if (in != out || resample != 0) conv_2_ = register_module("Conv_2", padded_conv(in, out, 1));
  }
  at::Tensor forward(at::Tensor x, const at::Tensor& temb_act) {
    at::Tensor h = at::silu(norm_0_->forward(x));
    if (resample_ != 0) {
      h = resampled(h);
      x = resampled(x);
    }
    h = conv_0_->forward(h) + dense_0_->forward(temb_act).unsqueeze(-1).unsqueeze(-1);
    h = at::dropout(at::silu(norm_1_->forward(h)), dropout_, is_training() && dropout_ > 0);
    h = conv_1_->forward(h);
    if (conv_2_) x = conv_2_->forward(x);
    return (x + h) * ncsnpp_skip_scale;
  }

 private:
  at::Tensor resampled(const at::Tensor& x) const {
    if (resample_ > 0) return at::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)});
    return at::avg_pool2d(x, {2, 2});
  }
  int resample_;
  double dropout_;
  std::shared_ptr<GroupNorm> norm_0_, norm_1_;
  std::shared_ptr<Conv2d> conv_0_, conv_1_, conv_2_;
  std::shared_ptr<Linear> dense_0_;
};

// AttnBlockpp: single-head self-attention over the positions with 1x1 projections (NIN_0..2 for
// q, k, v; NIN_3 out), the sum with the input scaled by 1/sqrt(2).
class NcsnppAttention : public torch::nn::Module {
 public:
  explicit NcsnppAttention(std::int64_t channels) {
    norm_ = register_module("GroupNorm_0", score_sde_group_norm(channels));
    for (int k = 0; k < 4; ++k) {
      nin_[k] = register_module("NIN_" + std::to_string(k), std::make_shared<Linear>(channels, channels));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    const std::int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const at::Tensor tokens = norm_->forward(x).reshape({b, c, h * w}).transpose(1, 2);  // [B, HW, C]
    const at::Tensor mixed = nin_[3]->forward(
        multi_head_attention(nin_[0]->forward(tokens), nin_[1]->forward(tokens), nin_[2]->forward(tokens), 1));
    return (x + mixed.transpose(1, 2).reshape({b, c, h, w})) * ncsnpp_skip_scale;
  }

 private:
  std::shared_ptr<GroupNorm> norm_;
  std::shared_ptr<Linear> nin_[4];
};

template <class M>
std::shared_ptr<M> Ncsnpp::add(std::shared_ptr<M> module) {
  all_modules_->push_back(module);
  return module;
}

// The module sequence of NCSNpp.__init__ (resblock_type biggan, progressive none): the order is
// the checkpoint's numbering.
Ncsnpp::Ncsnpp(NcsnppConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  const auto levels = static_cast<std::int64_t>(c.ch_mult.size());
  if (levels == 0 || c.nf < 4 || c.num_res_blocks < 1) throw std::invalid_argument("NCSN++: empty ch_mult, nf < 4 or no blocks");
  if (c.image_size % (std::int64_t{1} << (levels - 1)) != 0) {
    throw std::invalid_argument("NCSN++: image_size " + std::to_string(c.image_size) + " is not divisible by " +
                                std::to_string(std::int64_t{1} << (levels - 1)));
  }
  auto attention_at = [&](std::int64_t level) {
    const std::int64_t resolution = c.image_size >> level;
    return std::find(c.attn_resolutions.begin(), c.attn_resolutions.end(), resolution) != c.attn_resolutions.end();
  };
  const std::int64_t temb = 4 * c.nf;
  all_modules_ = register_module("all_modules", torch::nn::ModuleList());
  if (c.label_dim > 0) label_embedding_ = add(std::make_shared<engine::Embedding>(c.label_dim + 1, c.nf));
  dense_0_ = add(std::make_shared<Linear>(c.nf, temb));
  dense_1_ = add(std::make_shared<Linear>(temb, temb));
  conv_in_ = add(padded_conv(c.in_channels, c.nf, 3));
  auto block = [&](std::int64_t in, std::int64_t out, int resample) {
    blocks_.push_back({static_cast<std::int64_t>(all_modules_->size()), false});
    return add(std::make_shared<NcsnppResnetBlock>(in, out, temb, resample, c.dropout));
  };
  auto attention = [&](std::int64_t channels) {
    blocks_.push_back({static_cast<std::int64_t>(all_modules_->size()), true});
    return add(std::make_shared<NcsnppAttention>(channels));
  };
  std::vector<std::int64_t> skips{c.nf};
  std::int64_t width = c.nf;
  for (std::int64_t l = 0; l < levels; ++l) {
    Level level;
    for (std::int64_t j = 0; j < c.num_res_blocks; ++j) {
      const std::int64_t out = c.nf * c.ch_mult[static_cast<std::size_t>(l)];
      level.blocks.push_back(block(width, out, 0));
      width = out;
      if (attention_at(l)) level.attention.push_back(attention(width));
      skips.push_back(width);
    }
    if (l + 1 < levels) {
      level.resample = block(width, width, -1);
      skips.push_back(width);
    }
    down_.push_back(std::move(level));
  }
  mid_0_ = block(width, width, 0);
  mid_attention_ = attention(width);
  mid_1_ = block(width, width, 0);
  for (std::int64_t l = levels - 1; l >= 0; --l) {
    Level level;
    const std::int64_t out = c.nf * c.ch_mult[static_cast<std::size_t>(l)];
    for (std::int64_t j = 0; j <= c.num_res_blocks; ++j) {
      level.blocks.push_back(block(width + skips.back(), out, 0));
      skips.pop_back();
      width = out;
    }
    if (attention_at(l)) level.attention.push_back(attention(width));
    if (l != 0) level.resample = block(width, width, 1);
    up_.push_back(std::move(level));
  }
  norm_out_ = add(score_sde_group_norm(width));
  conv_out_ = add(padded_conv(width, c.out_channels, 3));
}

Ncsnpp::~Ncsnpp() = default;

at::Tensor Ncsnpp::forward(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels) {
  // score_sde's get_timestep_embedding: sin then cos of t * 10000^(-i / (half - 1)).
  const std::int64_t half = config_.nf / 2;
  const auto options = at::TensorOptions(at::kFloat).device(x.device());
  const at::Tensor frequencies = (at::arange(half, options) * (-std::log(10000.0) / static_cast<double>(half - 1))).exp();
  const at::Tensor angles = c_noise.to(at::kFloat).reshape({-1, 1}) * frequencies.unsqueeze(0);
  at::Tensor temb = at::cat({angles.sin(), angles.cos()}, 1).to(conv_in_->weight.scalar_type());
  if (label_embedding_) {
    if (!labels.defined()) throw std::invalid_argument("NCSN++: this network needs class labels");
    temb = temb + label_embedding_->forward(labels);
  }
  const at::Tensor temb_act = at::silu(dense_1_->forward(at::silu(dense_0_->forward(temb))));
  std::vector<at::Tensor> skips{conv_in_->forward(x)};
  at::Tensor h;
  for (auto& level : down_) {
    for (std::size_t j = 0; j < level.blocks.size(); ++j) {
      h = level.blocks[j]->forward(skips.back(), temb_act);
      if (!level.attention.empty()) h = level.attention[j]->forward(h);
      skips.push_back(h);
    }
    if (level.resample) skips.push_back(level.resample->forward(skips.back(), temb_act));
  }
  h = mid_1_->forward(mid_attention_->forward(mid_0_->forward(skips.back(), temb_act)), temb_act);
  for (auto& level : up_) {
    for (auto& block : level.blocks) {
      h = block->forward(at::cat({h, skips.back()}, 1), temb_act);
      skips.pop_back();
    }
    if (!level.attention.empty()) h = level.attention[0]->forward(h);
    if (level.resample) h = level.resample->forward(h, temb_act);
  }
  return conv_out_->forward(at::silu(norm_out_->forward(h)));
}

}  // namespace privdiff::sdk::diffusion
