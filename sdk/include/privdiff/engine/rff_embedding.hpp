#pragma once
/// @file
/// FETA-Pro's frequency release (DP-MERF's mean embedding, Harder et al. 2021): the private data's
/// class-conditional mean embedding in random Fourier features, released once with Gaussian noise.
///
/// Features: D/2 frequencies W [D/2, d] ~ N(0, 1) / length_scale, drawn from public randomness (the
/// stage's seed: they depend on nothing private), and for a flattened image p in [0, 1]^d
///   phi(p) = [cos(W p), sin(W p)] / sqrt(D / 2),   so ||phi(p)|| = 1 exactly,
/// the features of the Gaussian kernel exp(-||p - p'||^2 / (2 length_scale^2)). The statistic is the
/// class sums S_c = sum over the records of class c of phi(p_i), [classes, D]: adding or removing one
/// record moves one row by one phi, so its L2 sensitivity is 1 (add/remove; no clipping needed), and
/// the release is S + N(0, sigma^2) per entry: one Gaussian mechanism, rff_embedding_event. The
/// generator's targets divide by the public class size N / classes (the classes are the model's,
/// N is public as in DP-SGD's q = B / N): post-processing, never the private class counts.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine {

struct RffOptions {
  std::int64_t features = 10000;  ///< D (d_rff): the cos and sin halves of D / 2 frequencies; even
  double length_scale = 5.0;      ///< the kernel's length scale (rff_sigma), in [0, 1] pixel units
  double noise_multiplier = 5.0;  ///< sigma: noise std / sensitivity (the sensitivity is 1)
};

/// The privacy spent by the release: one Gaussian mechanism with sigma (sensitivity 1). Throws
/// std::invalid_argument for options out of range.
PRIVDIFF_SDK_API PrivacyEvent rff_embedding_event(const RffOptions& options);

/// The frequencies W [D / 2, dim] (float32, CPU) drawn from a CPU generator seeded with `seed`.
PRIVDIFF_SDK_API at::Tensor rff_frequencies(std::int64_t dim, const RffOptions& options, std::uint64_t seed);

/// phi of each row of `p` [N, dim] (flattened images in [0, 1]) -> [N, D] float64, each row of norm 1
/// (the angles W p in p's dtype: float32 for the generator's training, float64 for the release).
PRIVDIFF_SDK_API at::Tensor rff_features(const at::Tensor& p, const at::Tensor& frequencies);

/// The released statistic: images [N, C, H, W] in [-1, 1] (refused outside it: p = (x + 1) / 2 must
/// lie in [0, 1] for the kernel the length scale was chosen for) with labels [N] in [0, classes),
/// S + N(0, sigma^2) per entry, [classes, D] float64. The sums are taken a block of records at a time,
/// in float64 throughout: each record then adds its own features whatever the others.
PRIVDIFF_SDK_API at::Tensor rff_noisy_class_sums(const at::Tensor& images, const at::Tensor& labels, std::int64_t classes,
                                                 const at::Tensor& frequencies, const RffOptions& options,
                                                 GaussianNoise& noise);

/// The class sums without noise (what the checks compare), [classes, D] float64.
PRIVDIFF_SDK_API at::Tensor rff_class_sums(const at::Tensor& images, const at::Tensor& labels, std::int64_t classes,
                                           const at::Tensor& frequencies);

}  // namespace privdiff::sdk::engine
