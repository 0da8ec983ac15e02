#include <privdiff/diffusion/diffusers_autoencoder.hpp>

#include "diffusers_blocks.hpp"
#include "diffusers_config.hpp"

#include <privdiff/io/json_error.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

namespace privdiff::sdk::diffusion {

// The encoder (down levels, then the middle) or the decoder (the middle, then up levels), under
// diffusers' names: conv_in, down_blocks / up_blocks (resnets, downsamplers / upsamplers),
// mid_block (resnets, attentions), conv_norm_out, conv_out. No time embedding; GroupNorm eps 1e-6.
class DiffusersCoder : public torch::nn::Module {
 public:
  DiffusersCoder(const DiffusersAutoencoderKLConfig& c, bool encoder) : encoder_(encoder) {
    constexpr double eps = 1e-6;
    const auto& widths = c.block_out_channels;
    const auto levels = widths.size();
    const std::int64_t last = widths.back(), groups = c.norm_num_groups;
    conv_in_ = register_module("conv_in", padded_conv(encoder ? c.in_channels : c.latent_channels,
                                                         encoder ? widths.front() : last, 3));
    auto blocks = register_module(encoder ? "down_blocks" : "up_blocks", torch::nn::ModuleList());
    std::int64_t width = encoder ? widths.front() : last;
    for (std::size_t i = 0; i < levels; ++i) {
      const std::int64_t out = encoder ? widths[i] : widths[levels - 1 - i];
      auto level = std::make_shared<torch::nn::Module>();
      auto resnets = level->register_module("resnets", torch::nn::ModuleList());
      std::vector<std::shared_ptr<DiffusersResnet>> chain;
      for (std::int64_t j = 0; j < c.layers_per_block + (encoder ? 0 : 1); ++j) {
        chain.push_back(std::make_shared<DiffusersResnet>(j == 0 ? width : out, out, 0, groups, eps));
        resnets->push_back(chain.back());
      }
      std::shared_ptr<DiffusersResampler> resampler;
      if (i + 1 < levels) {
        auto list = level->register_module(encoder ? "downsamplers" : "upsamplers", torch::nn::ModuleList());
        resampler = std::make_shared<DiffusersResampler>(out, encoder, /*asymmetric_padding=*/encoder);
        list->push_back(resampler);
      }
      blocks->push_back(level);
      levels_.push_back({std::move(chain), resampler});
      width = out;
    }
    auto mid = register_module("mid_block", std::make_shared<torch::nn::Module>());
    auto mid_resnets = mid->register_module("resnets", torch::nn::ModuleList());
    for (int r = 0; r < 2; ++r) {
      mid_resnets_.push_back(std::make_shared<DiffusersResnet>(last, last, 0, groups, eps));
      mid_resnets->push_back(mid_resnets_.back());
    }
    if (c.mid_attention) {
      auto list = mid->register_module("attentions", torch::nn::ModuleList());
      mid_attention_ = std::make_shared<DiffusersAttention>(last, 1, groups, eps);
      list->push_back(mid_attention_);
    }
    const std::int64_t end = encoder ? last : widths.front();
    conv_norm_out_ = register_module("conv_norm_out", std::make_shared<GroupNorm>(groups, end, eps));
    conv_out_ = register_module("conv_out", padded_conv(end, encoder ? 2 * c.latent_channels : c.out_channels, 3));
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = conv_in_->forward(x);
    if (!encoder_) h = middle(h);
    for (auto& [resnets, resampler] : levels_) {
      for (auto& r : resnets) h = r->forward(h);
      if (resampler) h = resampler->forward(h);
    }
    if (encoder_) h = middle(h);
    return conv_out_->forward(at::silu(conv_norm_out_->forward(h)));
  }

 private:
  at::Tensor middle(at::Tensor h) {
    h = mid_resnets_[0]->forward(h);
    if (mid_attention_) h = mid_attention_->forward(h);
    return mid_resnets_[1]->forward(h);
  }
  struct Level {
    std::vector<std::shared_ptr<DiffusersResnet>> resnets;
    std::shared_ptr<DiffusersResampler> resampler;
  };
  bool encoder_;
  std::shared_ptr<Conv2d> conv_in_, conv_out_;
  std::vector<Level> levels_;
  std::vector<std::shared_ptr<DiffusersResnet>> mid_resnets_;
  std::shared_ptr<DiffusersAttention> mid_attention_;
  std::shared_ptr<GroupNorm> conv_norm_out_;
};

DiffusersAutoencoderKL::DiffusersAutoencoderKL(DiffusersAutoencoderKLConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  if (c.block_out_channels.empty()) throw std::invalid_argument("AutoencoderKL: block_out_channels is empty");
  encoder_ = register_module("encoder", std::make_shared<DiffusersCoder>(c, true));
  decoder_ = register_module("decoder", std::make_shared<DiffusersCoder>(c, false));
  if (c.quant_conv) quant_conv_ = register_module("quant_conv", padded_conv(2 * c.latent_channels, 2 * c.latent_channels, 1));
  if (c.post_quant_conv) post_quant_conv_ = register_module("post_quant_conv", padded_conv(c.latent_channels, c.latent_channels, 1));
}

DiffusersAutoencoderKL::~DiffusersAutoencoderKL() = default;

std::pair<at::Tensor, at::Tensor> DiffusersAutoencoderKL::encode(const at::Tensor& images) {
  at::Tensor moments = encoder_->forward(images);
  if (quant_conv_) moments = quant_conv_->forward(moments);
  const auto halves = moments.chunk(2, 1);
  return {halves[0], halves[1].clamp(-30.0, 20.0)};
}

at::Tensor DiffusersAutoencoderKL::decode(const at::Tensor& latents) {
  const at::Tensor z = post_quant_conv_ ? post_quant_conv_->forward(latents) : latents;
  return decoder_->forward(z);
}

DiffusersAutoencoderKLConfig diffusers_autoencoder_kl_config(const std::string& json_text, const std::string& what) {
  const nlohmann::json j = diffusers_config_json(json_text, what, "AutoencoderKL");
  require_diffusers_value(j, "act_fn", "silu", what, "AutoencoderKL");
  DiffusersAutoencoderKLConfig c;
  try {
    c.in_channels = j.value("in_channels", c.in_channels);
    c.out_channels = j.value("out_channels", c.out_channels);
    c.latent_channels = j.value("latent_channels", c.latent_channels);
    if (j.contains("block_out_channels")) c.block_out_channels = j["block_out_channels"].get<std::vector<std::int64_t>>();
    c.layers_per_block = j.value("layers_per_block", c.layers_per_block);
    c.norm_num_groups = j.value("norm_num_groups", c.norm_num_groups);
    c.mid_attention = j.value("mid_block_add_attention", c.mid_attention);
    c.quant_conv = j.value("use_quant_conv", c.quant_conv);
    c.post_quant_conv = j.value("use_post_quant_conv", c.post_quant_conv);
    if (j.contains("scaling_factor") && j["scaling_factor"].is_number()) c.scaling_factor = j["scaling_factor"];
    const auto down = j.value("down_block_types", std::vector<std::string>(c.block_out_channels.size(), "DownEncoderBlock2D"));
    const auto up = j.value("up_block_types", std::vector<std::string>(c.block_out_channels.size(), "UpDecoderBlock2D"));
    if (down.size() != c.block_out_channels.size() || up.size() != down.size()) {
      throw std::invalid_argument(what + ": down_block_types, up_block_types and block_out_channels differ in length");
    }
    for (std::size_t i = 0; i < down.size(); ++i) {
      if (down[i] != "DownEncoderBlock2D" || up[i] != "UpDecoderBlock2D") {
        throw std::invalid_argument(what + ": block types " + down[i] + " / " + up[i] +
                                    " are not supported (DownEncoderBlock2D / UpDecoderBlock2D)");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": " + json_error_text(e));
  }
  return c;
}

}  // namespace privdiff::sdk::diffusion
