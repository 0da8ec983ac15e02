#pragma once
/// @file
/// DPDM's training loss with noise multiplicity: for every example, K draws of (sigma, noise); the
/// per-row loss is lambda(sigma) * mean over pixels of (D(x + sigma n; sigma, y) - x)^2. Label
/// dropout for classifier-free guidance is drawn once per example and shared by its K rows.

#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <functional>

namespace privdiff::sdk::diffusion {

/// The raw network F(c_in x, c_noise, labels) (labels int64; null label = num_classes).
using Network = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels)>;

/// The preconditioned denoiser D(x; sigma, labels).
PRIVDIFF_SDK_API at::Tensor denoise(const Network& network, const Preconditioning& preconditioning, const at::Tensor& x,
                                    const at::Tensor& sigma, const at::Tensor& labels);

/// A Conditioning's labels as the network takes them: -1 ("no label", classifier-free guidance's
/// unconditional branch) becomes the null class `num_classes`; undefined stays undefined.
PRIVDIFF_SDK_API at::Tensor network_labels(const at::Tensor& labels, std::int64_t num_classes);

struct DenoisingLossOptions {
  std::int64_t noise_multiplicity = 1;  ///< K
  double label_dropout = 0.1;           ///< probability of the null label, per example
  std::int64_t num_classes = 10;        ///< 0: unconditional (labels ignored)
};

/// Per-row losses [B * K] (example-major) for images [B, C, H, W] in [-1, 1] and labels [B].
PRIVDIFF_SDK_API at::Tensor denoising_loss(const Network& network, const Preconditioning& preconditioning,
                                           const at::Tensor& images, const at::Tensor& labels,
                                           const DenoisingLossOptions& options, at::Generator& generator);

}  // namespace privdiff::sdk::diffusion
