#include <privdiff/diffusion/autoencoder.hpp>

#include "norm_groups.hpp"
#include "padded_conv.hpp"

#include <ATen/ATen.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::diffusion {

using engine::Conv2d;
using engine::GroupNorm;

// GroupNorm, SiLU, conv, twice, with a (1x1 conv) skip: LDM's ResnetBlock without a time embedding.
// Not in an anonymous namespace: AutoencoderStage (declared in the header) holds these.
class AutoencoderBlock : public torch::nn::Module {
 public:
  AutoencoderBlock(std::int64_t in, std::int64_t out) {
    norm1_ = register_module("norm1", std::make_shared<GroupNorm>(norm_groups(in), in, 1e-6));
    conv1_ = register_module("conv1", padded_conv(in, out, 3));
    norm2_ = register_module("norm2", std::make_shared<GroupNorm>(norm_groups(out), out, 1e-6));
    conv2_ = register_module("conv2", padded_conv(out, out, 3));
    if (in != out) skip_ = register_module("skip", padded_conv(in, out, 1));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = conv2_->forward(at::silu(norm2_->forward(conv1_->forward(at::silu(norm1_->forward(x))))));
    return (skip_ ? skip_->forward(x) : x) + h;
  }

 private:
  std::shared_ptr<GroupNorm> norm1_, norm2_;
  std::shared_ptr<Conv2d> conv1_, conv2_, skip_;
};

// One resolution level: residual blocks, then a resampling (stride-2 conv down, or nearest x2 and
// a conv up) unless it is the last level.
class AutoencoderStage : public torch::nn::Module {
 public:
  AutoencoderStage(std::int64_t in, std::int64_t out, std::int64_t blocks, int resample) : resample_(resample) {
    for (std::int64_t b = 0; b < blocks; ++b) {
      blocks_.push_back(register_module("block" + std::to_string(b), std::make_shared<AutoencoderBlock>(b == 0 ? in : out, out)));
    }
    if (resample != 0) resampler_ = register_module("resample", padded_conv(out, out, 3, resample < 0 ? 2 : 1));
  }
  at::Tensor forward(at::Tensor x) {
    for (const auto& b : blocks_) x = b->forward(x);
    if (resample_ < 0) return resampler_->forward(x);
    if (resample_ > 0) return resampler_->forward(at::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)}));
    return x;
  }

 private:
  int resample_;  ///< -1 down, +1 up, 0 none
  std::vector<std::shared_ptr<AutoencoderBlock>> blocks_;
  std::shared_ptr<Conv2d> resampler_;
};

at::Tensor gaussian_kl(const at::Tensor& mean, const at::Tensor& logvar) {
  return 0.5 * (mean.pow(2) + logvar.exp() - 1.0 - logvar).flatten(1).sum(1);
}

Autoencoder::Autoencoder(AutoencoderConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  if (c.channel_mult.empty()) throw std::invalid_argument("autoencoder: channel_mult needs at least one level");
  if (c.reconstruction != "l1" && c.reconstruction != "l2") {
    throw std::invalid_argument("autoencoder: reconstruction must be \"l1\" or \"l2\"");
  }
  const auto levels = static_cast<std::int64_t>(c.channel_mult.size());
  encoder_in_ = register_module("encoder_in", padded_conv(c.image_channels, c.channels, 3));
  std::int64_t width = c.channels;
  for (std::int64_t l = 0; l < levels; ++l) {
    const std::int64_t out = c.channels * c.channel_mult[static_cast<std::size_t>(l)];
    encoder_.push_back(register_module("encoder" + std::to_string(l),
                                       std::make_shared<AutoencoderStage>(width, out, c.num_res_blocks,
                                                                          l + 1 < levels ? -1 : 0)));
    width = out;
  }
  encoder_norm_ = register_module("encoder_norm", std::make_shared<GroupNorm>(norm_groups(width), width, 1e-6));
  encoder_out_ = register_module("encoder_out", padded_conv(width, 2 * c.latent_channels, 3));  // mean, logvar
  decoder_in_ = register_module("decoder_in", padded_conv(c.latent_channels, width, 3));
  for (std::int64_t l = levels - 1; l >= 0; --l) {
    const std::int64_t out = c.channels * c.channel_mult[static_cast<std::size_t>(l)];
    decoder_.push_back(register_module("decoder" + std::to_string(levels - 1 - l),
                                       std::make_shared<AutoencoderStage>(width, out, c.num_res_blocks, l > 0 ? 1 : 0)));
    width = out;
  }
  decoder_norm_ = register_module("decoder_norm", std::make_shared<GroupNorm>(norm_groups(width), width, 1e-6));
  decoder_out_ = register_module("decoder_out", padded_conv(width, c.image_channels, 3));
  latent_moments_ = register_buffer("latent_moments", at::zeros({3}, at::kDouble));
}

Autoencoder::~Autoencoder() = default;

std::int64_t downsampling_factor(const AutoencoderConfig& config) {
  return std::int64_t{1} << (config.channel_mult.size() - 1);
}

std::int64_t Autoencoder::downsampling_factor() const { return diffusion::downsampling_factor(config_); }

Autoencoder::Posterior Autoencoder::encode(const at::Tensor& images) {
  const std::int64_t f = downsampling_factor();
  if (images.size(2) % f != 0 || images.size(3) % f != 0) {
    throw std::invalid_argument("autoencoder: image size " + std::to_string(images.size(2)) + "x" +
                                std::to_string(images.size(3)) + " is not divisible by the downsampling factor " +
                                std::to_string(f));
  }
  at::Tensor h = encoder_in_->forward(images);
  for (const auto& stage : encoder_) h = stage->forward(h);
  const auto moments = encoder_out_->forward(at::silu(encoder_norm_->forward(h))).chunk(2, 1);
  return {moments[0], moments[1].clamp(-30.0, 20.0)};  // LDM's clamp of the log-variance
}

at::Tensor Autoencoder::decode(const at::Tensor& latents) {
  at::Tensor h = decoder_in_->forward(latents);
  for (const auto& stage : decoder_) h = stage->forward(h);
  return decoder_out_->forward(at::silu(decoder_norm_->forward(h)));
}

at::Tensor Autoencoder::loss(const at::Tensor& images, at::Generator& generator) {
  const Posterior posterior = encode(images);
  const at::Tensor noise = at::randn(posterior.mean.sizes(), generator, posterior.mean.options());
  const at::Tensor latents = posterior.mean + (0.5 * posterior.logvar).exp() * noise;
  const at::Tensor error = decode(latents) - images;
  const at::Tensor reconstruction =
      (config_.reconstruction == "l1" ? error.abs() : error.pow(2)).flatten(1).sum(1);
  return reconstruction + config_.kl_weight * gaussian_kl(posterior.mean, posterior.logvar);
}

void Autoencoder::reset_latent_statistics() {
  torch::NoGradGuard no_grad;
  latent_moments_.zero_();
}

void Autoencoder::observe_latents(const at::Tensor& images) {
  torch::NoGradGuard no_grad;
  const at::Tensor m = encode(images).mean.to(at::kDouble);
  latent_moments_ += at::stack({at::full({}, static_cast<double>(m.numel()), m.options()), m.sum(), m.pow(2).sum()})
                         .to(latent_moments_.device());
}

bool Autoencoder::has_latent_statistics() const { return latent_moments_[0].item<double>() > 0; }

double Autoencoder::scale_factor() const {
  const at::Tensor m = latent_moments_.to(at::kCPU);
  const double count = m[0].item<double>();
  if (count < 2) return 1.0;
  const double mean = m[1].item<double>() / count;
  const double variance = m[2].item<double>() / count - mean * mean;
  return variance > 0 ? 1.0 / std::sqrt(variance) : 1.0;
}

}  // namespace privdiff::sdk::diffusion
