#include <privdiff/engine/gaussian_noise.hpp>

#include <ATen/ATen.h>

#include <vector>

namespace privdiff::sdk::engine {

GaussianNoise GaussianNoise::seeded(std::uint64_t seed) {
  return GaussianNoise(RandomStream::reproducible(seed, 0, StreamPurpose::noise));
}

GaussianNoise GaussianNoise::secure() { return GaussianNoise(RandomStream::secret(StreamPurpose::noise)); }

at::Tensor GaussianNoise::sample(const at::Tensor& like, double std) {
  const auto n = static_cast<std::size_t>(like.numel());
  const std::vector<double> a = stream_.standard_normals(4 * n);
  at::Tensor z = at::empty(like.sizes(), at::TensorOptions().dtype(at::kDouble));
  double* dst = z.data_ptr<double>();
  for (std::size_t i = 0; i < n; ++i) dst[i] = (a[4 * i] + a[4 * i + 1] + a[4 * i + 2] + a[4 * i + 3]) / 2;
  return (z * std).to(like.options().requires_grad(false));
}

}  // namespace privdiff::sdk::engine
