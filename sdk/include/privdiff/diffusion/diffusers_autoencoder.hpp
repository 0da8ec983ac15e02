#pragma once
/// @file
/// Hugging Face diffusers' AutoencoderKL (the KL autoencoder of latent diffusion and Stable Diffusion)
/// rebuilt from privdiff's per-example layers, with diffusers' parameter names: a diffusers folder's
/// weights load into it by name and give the same latent moments and decodings
/// (tests/fixtures/weights/diffusers, made with diffusers 0.42.1). Supported: DownEncoderBlock2D /
/// UpDecoderBlock2D levels, the mid block with or without attention, the quant convolutions on or off;
/// other config.json options are refused by name.

#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk::diffusion {

struct DiffusersAutoencoderKLConfig {
  std::int64_t in_channels = 3, out_channels = 3, latent_channels = 4;
  std::vector<std::int64_t> block_out_channels{64};
  std::int64_t layers_per_block = 1;
  std::int64_t norm_num_groups = 32;
  bool mid_attention = true;  ///< mid_block_add_attention
  bool quant_conv = true, post_quant_conv = true;
  double scaling_factor = 0.18215;  ///< what latents are multiplied by before the diffusion model sees them
};

/// An AutoencoderKL config.json (its text; `what` names it in errors). Throws std::invalid_argument
/// naming the first key whose value the port does not support.
PRIVDIFF_SDK_API DiffusersAutoencoderKLConfig diffusers_autoencoder_kl_config(const std::string& json_text,
                                                                             const std::string& what);

class DiffusersCoder;

class PRIVDIFF_SDK_API DiffusersAutoencoderKL : public torch::nn::Module {
 public:
  explicit DiffusersAutoencoderKL(DiffusersAutoencoderKLConfig config);
  ~DiffusersAutoencoderKL() override;
  /// encode(x).latent_dist's mean and log-variance (clamped to [-30, 20], as diffusers does).
  std::pair<at::Tensor, at::Tensor> encode(const at::Tensor& images);
  /// decode(z).sample.
  at::Tensor decode(const at::Tensor& latents);
  const DiffusersAutoencoderKLConfig& config() const { return config_; }

 private:
  DiffusersAutoencoderKLConfig config_;
  std::shared_ptr<DiffusersCoder> encoder_, decoder_;
  std::shared_ptr<engine::Conv2d> quant_conv_, post_quant_conv_;
};

}  // namespace privdiff::sdk::diffusion
