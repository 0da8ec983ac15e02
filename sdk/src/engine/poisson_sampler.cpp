#include <privdiff/engine/poisson_sampler.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace privdiff::sdk::engine {

PoissonSampler::PoissonSampler(std::int64_t dataset_size, double sampling_rate, RandomStream stream)
    : n_(dataset_size), q_(sampling_rate), stream_(std::move(stream)) {
  if (dataset_size < 1) throw std::invalid_argument("Poisson sampling: the dataset is empty");
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    throw std::invalid_argument("Poisson sampling: the sampling rate must be in (0, 1]");
  }
}

at::Tensor PoissonSampler::next() {
  // Example i is in the batch iff u_i < q, u_i = w_i / 2^53 uniform on a 53-bit grid.
  const double threshold = std::ldexp(q_, 53);
  const std::vector<std::uint64_t> w = stream_.words(static_cast<std::size_t>(n_));
  std::vector<std::int64_t> members;
  members.reserve(static_cast<std::size_t>(q_ * static_cast<double>(n_) * 1.2) + 16);
  for (std::int64_t i = 0; i < n_; ++i) {
    if (static_cast<double>(w[static_cast<std::size_t>(i)]) < threshold) members.push_back(i);
  }
  return at::tensor(members, at::kLong);
}

}  // namespace privdiff::sdk::engine
