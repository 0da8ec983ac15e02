#include <privdiff/engine/rff_embedding.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::engine {

namespace {

void check_options(const RffOptions& o) {
  if (o.features < 2 || o.features % 2 != 0) {
    throw std::invalid_argument("rff embedding: features must be even and >= 2, got " + std::to_string(o.features));
  }
  if (!(o.length_scale > 0)) throw std::invalid_argument("rff embedding: the length scale must be > 0");
  if (!(o.noise_multiplier > 0)) throw std::invalid_argument("rff embedding: the noise multiplier must be > 0");
}

}  // namespace

PrivacyEvent rff_embedding_event(const RffOptions& o) {
  check_options(o);
  return PrivacyEvent::gaussian(o.noise_multiplier);
}

at::Tensor rff_frequencies(std::int64_t dim, const RffOptions& o, std::uint64_t seed) {
  check_options(o);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({o.features / 2, dim}, generator, at::TensorOptions().dtype(at::kFloat)) / o.length_scale;
}

at::Tensor rff_features(const at::Tensor& p, const at::Tensor& frequencies) {
  const at::Tensor w = frequencies.to(p.device()).to(p.scalar_type());
  // The angles in the input's precision, their cosines and sines in float64: cos^2 + sin^2 = 1 then
  // holds to 1e-16 whatever the angles' rounding, so each row's norm is 1 (the sensitivity) exactly.
  const at::Tensor projected = at::matmul(p, w.t()).to(at::kDouble);  // [N, D / 2]
  return at::cat({at::cos(projected), at::sin(projected)}, 1) / std::sqrt(static_cast<double>(w.size(0)));
}

at::Tensor rff_class_sums(const at::Tensor& images, const at::Tensor& labels, std::int64_t classes,
                          const at::Tensor& frequencies) {
  // Written so that NaN fails too (NaN < -1 and NaN > 1 are both false): a NaN pixel would make its
  // record's row NaN, a change no sensitivity bounds.
  if (images.numel() > 0 && !(images.min().item<double>() >= -1 && images.max().item<double>() <= 1)) {
    throw std::invalid_argument("rff embedding: images must lie in [-1, 1], finite (the features' bound assumes pixels "
                                "in [0, 1])");
  }
  if (labels.numel() > 0 && (labels.min().item<std::int64_t>() < 0 || labels.max().item<std::int64_t>() >= classes)) {
    throw std::invalid_argument("rff embedding: labels must lie in [0, " + std::to_string(classes) + ")");
  }
  const std::int64_t n = images.size(0);
  at::Tensor sums = at::zeros({classes, 2 * frequencies.size(0)}, at::TensorOptions(at::kDouble).device(images.device()));
  // A block of records at a time: N x D features at once would be 2.4 GB for Fashion-MNIST.
  constexpr std::int64_t block = 1024;
  for (std::int64_t start = 0; start < n; start += block) {
    const std::int64_t len = std::min(block, n - start);
    // In float64: a float32 product's rounding depends on the block's other rows (the BLAS's
    // blocking), so a record's features would change with its neighbours by ~1e-7, and the sums by
    // more than the one record's norm-1 features (check-mechanism's replay measured 1 + 2e-8).
    const at::Tensor p = (images.narrow(0, start, len).reshape({len, -1}).to(at::kDouble) + 1) / 2;
    sums.index_add_(0, labels.narrow(0, start, len).to(at::kLong), rff_features(p, frequencies));
  }
  return sums;
}

at::Tensor rff_noisy_class_sums(const at::Tensor& images, const at::Tensor& labels, std::int64_t classes,
                                const at::Tensor& frequencies, const RffOptions& o, GaussianNoise& noise) {
  check_options(o);
  const at::Tensor sums = rff_class_sums(images, labels, classes, frequencies);
  return sums + noise.sample(sums, o.noise_multiplier);  // sensitivity 1: std sigma
}

}  // namespace privdiff::sdk::engine
