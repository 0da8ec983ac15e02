#pragma once
/// @file
/// The KL-regularised convolutional autoencoder of latent diffusion (LDM's AutoencoderKL, small):
/// an encoder to a diagonal Gaussian over latents [latent_channels, H / f, W / f] (f = 2^(levels-1),
/// e.g. 28x28 -> 14x14 or 7x7), a decoder back to images, and LDM's latent scaling factor 1 / std
/// of the latents, fitted on (public) data once the autoencoder has trained. Trained on public data by
/// reconstruction + kl_weight * KL (no perceptual or adversarial term: there is no pretrained
/// perceptual network here); frozen while a latent diffusion model trains on its latents.
/// Built from per-example layers like every privdiff network.

#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk::diffusion {

struct AutoencoderConfig {
  std::int64_t image_channels = 1;
  std::int64_t channels = 32;
  std::vector<std::int64_t> channel_mult{1, 2, 2};  ///< levels; downsampling factor 2^(levels - 1)
  std::int64_t num_res_blocks = 1;
  std::int64_t latent_channels = 4;
  std::string reconstruction = "l1";  ///< "l1" (LDM's pixel term) or "l2"
  double kl_weight = 1e-6;            ///< on the per-example KL sum, against the per-example pixel sum (LDM's KL-f4: 1e-6)
};

/// The downsampling factor of an autoencoder of this configuration: 2^(levels - 1).
PRIVDIFF_SDK_API std::int64_t downsampling_factor(const AutoencoderConfig& config);

/// Per-example KL( N(mean, exp(logvar)) || N(0, I) ), summed over every latent element: [N].
PRIVDIFF_SDK_API at::Tensor gaussian_kl(const at::Tensor& mean, const at::Tensor& logvar);

class AutoencoderStage;

class PRIVDIFF_SDK_API Autoencoder : public torch::nn::Module {
 public:
  explicit Autoencoder(AutoencoderConfig config);
  ~Autoencoder() override;

  struct Posterior {
    at::Tensor mean, logvar;  ///< [N, latent_channels, h, w]
  };
  Posterior encode(const at::Tensor& images);
  at::Tensor decode(const at::Tensor& latents);
  /// Per-example objective [N]: reconstruction of a posterior sample (summed over pixels) plus
  /// kl_weight * KL.
  at::Tensor loss(const at::Tensor& images, at::Generator& generator);
  /// Fitting the scale factor: reset, then observe the data in batches (without gradient). The
  /// statistics are a buffer, saved with the weights. Only ever on public data: they are not noised.
  void reset_latent_statistics();
  void observe_latents(const at::Tensor& images);
  /// LDM's scaling: latents are multiplied by this (1 / std of the posterior means observed) so
  /// that the diffusion model sees roughly unit variance; 1 before any observation.
  double scale_factor() const;
  /// Whether latents were observed since construction (or the last reset): the scale factor is fitted.
  bool has_latent_statistics() const;
  std::int64_t downsampling_factor() const;
  const AutoencoderConfig& config() const { return config_; }

 private:
  AutoencoderConfig config_;
  std::shared_ptr<engine::Conv2d> encoder_in_, encoder_out_, decoder_in_, decoder_out_;
  std::shared_ptr<engine::GroupNorm> encoder_norm_, decoder_norm_;
  std::vector<std::shared_ptr<AutoencoderStage>> encoder_, decoder_;
  at::Tensor latent_moments_;  ///< buffer [3]: count, sum, sum of squares of posterior means
};

}  // namespace privdiff::sdk::diffusion
