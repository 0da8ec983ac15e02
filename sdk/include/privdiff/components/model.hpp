#pragma once
/// @file
/// Model: a denoiser D(x, sigma, cond) under a preconditioning, built from SDK layers.

#include <privdiff/components/component.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk {

/// Conditioning for one batch. `labels` is int64 [B]; -1 means "no label" (the unconditional
/// branch of classifier-free guidance). An undefined tensor means an unconditional model.
struct Conditioning {
  at::Tensor labels;
};

/// A parameter with the role and block index that parameter selectors match on, e.g.
/// {"down.2.attn.qkv.weight", "attention", 2, tensor}. Roles: "attention", "cross_attention",
/// "conditioning", "resblock", "embedding", "norm", "io", "lora".
struct ParameterInfo {
  std::string name;
  std::string role;
  int block_index = -1;  ///< -1 when the parameter belongs to no numbered block
  at::Tensor parameter;
};

class PRIVDIFF_SDK_API Model : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::model;
  ~Model() override;

  /// The module tree (owned by the model); what optimizers and checkpoints work on.
  virtual torch::nn::Module& module() = 0;
  /// The preconditioned denoiser: an estimate of the clean sample given x = sample + sigma * noise.
  /// x: [B, ...sample_shape()], sigma: [B] absolute noise levels (not multipliers).
  virtual at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) = 0;
  /// Every parameter with its role and block index.
  virtual std::vector<ParameterInfo> parameters_with_roles() = 0;
  /// Shape of one sample in the space the sampler works in (latent shape for latent models).
  virtual std::vector<std::int64_t> sample_shape() const = 0;
  /// Per-row training losses for a batch of images [B, C, H, W] with their conditioning:
  /// `noise_multiplicity` (K) rows per example, example-major, shape [B * K]; the loss of example i
  /// is the mean of its K rows (e.g. K noise draws of the denoising loss, DPDM's noise
  /// multiplicity). All randomness comes from `generator`.
  virtual at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond,
                                   std::int64_t noise_multiplicity, at::Generator& generator) = 0;
  /// Image -> sampler space. Identity for pixel-space models.
  virtual at::Tensor encode(const at::Tensor& images) { return images; }
  /// Sampler space -> image in [-1, 1]. Identity for pixel-space models.
  virtual at::Tensor decode(const at::Tensor& latents) { return latents; }
};

}  // namespace privdiff::sdk
