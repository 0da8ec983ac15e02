#include <privdiff/diffusion/compvis_ldm.hpp>

#include "compvis_blocks.hpp"

#include <algorithm>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

namespace cv = compvis;
using engine::Conv2d;
using engine::GroupNorm;
using engine::Linear;

// One level of the Encoder (down.i) or Decoder (up.i): its residual blocks ("block.j"), attention
// after each where the level's resolution has it ("attn.j"), and its resampler ("downsample.conv"
// padded right and bottom before a stride-2 convolution, or "upsample.conv" after nearest upsampling).
struct CompVisAutoencoderKL::Level : torch::nn::Module {
  std::vector<std::shared_ptr<cv::AutoencoderResnet>> blocks;
  std::vector<std::shared_ptr<cv::AutoencoderAttention>> attention;
  std::shared_ptr<Conv2d> resample;
  bool down = true;

  Level(std::int64_t in, std::int64_t out, std::int64_t count, bool attend, int resample_kind) : down(resample_kind < 0) {
    auto block_list = register_module("block", torch::nn::ModuleList());
    auto attn_list = register_module("attn", torch::nn::ModuleList());
    for (std::int64_t j = 0; j < count; ++j) {
      blocks.push_back(std::make_shared<cv::AutoencoderResnet>(j == 0 ? in : out, out));
      block_list->push_back(blocks.back());
      if (attend) {
        attention.push_back(std::make_shared<cv::AutoencoderAttention>(out));
        attn_list->push_back(attention.back());
      }
    }
    if (resample_kind != 0) {
      auto wrapper = register_module(down ? "downsample" : "upsample", std::make_shared<torch::nn::Module>());
      resample = wrapper->register_module("conv", padded_conv(out, out, 3, down ? 2 : 1, down ? 0 : 1));
    }
  }
  at::Tensor forward(at::Tensor h) {
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      h = blocks[j]->forward(h);
      if (!attention.empty()) h = attention[j]->forward(h);
    }
    if (!resample) return h;
    return down ? resample->forward(at::constant_pad_nd(h, {0, 1, 0, 1})) : resample->forward(cv::nearest_up(h));
  }
};

CompVisAutoencoderKL::CompVisAutoencoderKL(CompVisAutoencoderConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  const auto levels = static_cast<std::int64_t>(c.ch_mult.size());
  if (levels == 0 || c.num_res_blocks < 1) throw std::invalid_argument("AutoencoderKL: empty ch_mult or no blocks");
  auto attention_at = [&](std::int64_t level) {
    return std::find(c.attn_resolutions.begin(), c.attn_resolutions.end(), c.resolution >> level) != c.attn_resolutions.end();
  };
  auto width = [&](std::int64_t level) { return c.ch * c.ch_mult[static_cast<std::size_t>(level)]; };
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  enc_conv_in_ = encoder->register_module("conv_in", padded_conv(c.in_channels, c.ch, 3));
  auto down = encoder->register_module("down", torch::nn::ModuleList());
  for (std::int64_t l = 0; l < levels; ++l) {
    down_.push_back(std::make_shared<Level>(l == 0 ? c.ch : width(l - 1), width(l), c.num_res_blocks, attention_at(l),
                                            l + 1 < levels ? -1 : 0));
    down->push_back(down_.back());
  }
  const std::int64_t top = width(levels - 1);
  auto mid_of = [&](torch::nn::Module& parent, std::shared_ptr<cv::AutoencoderResnet>& b1,
                    std::shared_ptr<cv::AutoencoderAttention>& attn, std::shared_ptr<cv::AutoencoderResnet>& b2) {
    auto mid = parent.register_module("mid", std::make_shared<torch::nn::Module>());
    b1 = mid->register_module("block_1", std::make_shared<cv::AutoencoderResnet>(top, top));
    attn = mid->register_module("attn_1", std::make_shared<cv::AutoencoderAttention>(top));
    b2 = mid->register_module("block_2", std::make_shared<cv::AutoencoderResnet>(top, top));
  };
  mid_of(*encoder, enc_mid_1_, enc_mid_attn_, enc_mid_2_);
  enc_norm_out_ = encoder->register_module("norm_out", std::make_shared<GroupNorm>(32, top, 1e-6));
  enc_conv_out_ = encoder->register_module("conv_out", padded_conv(top, 2 * c.z_channels, 3));
  auto decoder = register_module("decoder", std::make_shared<torch::nn::Module>());
  dec_conv_in_ = decoder->register_module("conv_in", padded_conv(c.z_channels, top, 3));
  mid_of(*decoder, dec_mid_1_, dec_mid_attn_, dec_mid_2_);
  // up.i is level i (the Decoder prepends as it builds from the top): its input is level i+1's width.
  auto up = decoder->register_module("up", torch::nn::ModuleList());
  for (std::int64_t l = 0; l < levels; ++l) {
    up_.push_back(std::make_shared<Level>(l + 1 < levels ? width(l + 1) : top, width(l), c.num_res_blocks + 1,
                                          attention_at(l), l > 0 ? 1 : 0));
    up->push_back(up_.back());
  }
  dec_norm_out_ = decoder->register_module("norm_out", std::make_shared<GroupNorm>(32, width(0), 1e-6));
  dec_conv_out_ = decoder->register_module("conv_out", padded_conv(width(0), c.out_ch, 3));
  quant_conv_ = register_module("quant_conv", padded_conv(2 * c.z_channels, 2 * c.embed_dim, 1));
  post_quant_conv_ = register_module("post_quant_conv", padded_conv(c.embed_dim, c.z_channels, 1));
}

CompVisAutoencoderKL::~CompVisAutoencoderKL() = default;

std::pair<at::Tensor, at::Tensor> CompVisAutoencoderKL::encode(const at::Tensor& images) {
  at::Tensor h = enc_conv_in_->forward(images);
  for (auto& level : down_) h = level->forward(h);
  h = enc_mid_2_->forward(enc_mid_attn_->forward(enc_mid_1_->forward(h)));
  const auto moments = quant_conv_->forward(enc_conv_out_->forward(at::silu(enc_norm_out_->forward(h)))).chunk(2, 1);
  return {moments[0], moments[1].clamp(-30.0, 20.0)};
}

at::Tensor CompVisAutoencoderKL::decode(const at::Tensor& latents) {
  at::Tensor h = dec_conv_in_->forward(post_quant_conv_->forward(latents));
  h = dec_mid_2_->forward(dec_mid_attn_->forward(dec_mid_1_->forward(h)));
  for (auto level = up_.rbegin(); level != up_.rend(); ++level) h = (*level)->forward(h);
  return dec_conv_out_->forward(at::silu(dec_norm_out_->forward(h)));
}

}  // namespace privdiff::sdk::diffusion
