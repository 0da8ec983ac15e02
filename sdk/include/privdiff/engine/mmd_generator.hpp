#pragma once
/// @file
/// FETA-Pro's auxiliary generator: a small class-conditional convolutional generator trained,
/// without privacy cost (post-processing), to match a released random-Fourier-feature mean
/// embedding (rff_embedding.hpp) by DP-MERF's MMD loss, whose images then warm a diffusion model up.
///
/// The loss of a batch of B generated images g_b with uniform labels y_b (FETA-Pro,
/// models/DP_MERF/rff_mmd_approx.py):
///   L = || E - (1/B) sum_b phi(g_b) onehot(y_b)^T ||^2,   E = (noisy class sums) / N,
/// with N the public dataset size. The authors' generator is StudioGAN's BigGAN (1.5M parameters,
/// spectral norm, conditional batch norm, self-attention at 28 x 28); this one is a plain DCGAN-style
/// stack sized for a CPU (docs/methods/feta-pro.md says what differs): z and a class embedding ->
/// Linear -> [channels, H/4, W/4] -> (batch norm, ReLU, x2 nearest upsampling, 3x3 conv) twice ->
/// batch norm, ReLU, 3x3 conv -> tanh, images in [-1, 1].

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <functional>
#include <utility>

namespace privdiff::sdk::engine {

struct MmdGeneratorOptions {
  std::int64_t latent_dim = 60;     ///< z's size (the authors' z_dim)
  std::int64_t channels = 64;       ///< feature maps of every block (the authors': 164)
  std::int64_t steps = 2750;        ///< Adam steps (the authors': 5 epochs of N / 100 = 550)
  std::int64_t batch_size = 100;    ///< images per step, labels uniform over the classes
  double lr = 0.01;                 ///< Adam's learning rate
  double lr_decay = 0.9;            ///< multiplied into the learning rate every `decay_every` steps
  std::int64_t decay_every = 550;   ///< (the authors' StepLR once per epoch)
};

class PRIVDIFF_SDK_API ConditionalGenerator : public torch::nn::Module {
 public:
  /// Images [channels_out, size, size]; size divisible by 4.
  ConditionalGenerator(std::int64_t classes, std::int64_t channels_out, std::int64_t size, const MmdGeneratorOptions& options);
  /// z [B, latent_dim], labels int64 [B] -> images [B, channels_out, size, size] in [-1, 1].
  at::Tensor forward(const at::Tensor& z, const at::Tensor& labels);
  std::int64_t latent_dim() const { return latent_dim_; }

 private:
  at::Tensor block(int i, const at::Tensor& h);
  std::int64_t latent_dim_, channels_, base_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::Linear input_{nullptr};
  torch::nn::BatchNorm2d norm0_{nullptr}, norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, out_{nullptr};
};

/// DP-MERF's MMD loss of one batch: `target` [classes, D] (E above), `features` [B, D] of the
/// generated images with their `labels` [B].
PRIVDIFF_SDK_API at::Tensor mmd_loss(const at::Tensor& target, const at::Tensor& features, const at::Tensor& labels);

/// Trains `generator` on `target` (E above) with the features' `frequencies`, drawing its latents and
/// labels from a CPU generator seeded with `seed` (public). `progress(step, loss)` is called every 50
/// steps and after the last. Returns the last step's loss.
PRIVDIFF_SDK_API double fit_mmd_generator(ConditionalGenerator& generator, const at::Tensor& target,
                                          const at::Tensor& frequencies, const MmdGeneratorOptions& options,
                                          std::uint64_t seed,
                                          const std::function<void(std::int64_t, double)>& progress = {});

/// `per_class` images of each class in eval mode (batch norm's running statistics), in batches of at
/// most 1,000, class-major; returns (images [classes * per_class, C, H, W] in [-1, 1], labels).
PRIVDIFF_SDK_API std::pair<at::Tensor, at::Tensor> generate_images(ConditionalGenerator& generator, std::int64_t classes,
                                                                   std::int64_t per_class, std::uint64_t seed);

}  // namespace privdiff::sdk::engine
