#include <privdiff/engine/poisson_sampler.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>

namespace privdiff::sdk::engine {

PoissonSampler::PoissonSampler(std::int64_t dataset_size, double sampling_rate, std::uint64_t seed)
    : n_(dataset_size), q_(sampling_rate), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  if (dataset_size < 1) throw std::invalid_argument("Poisson sampling: the dataset is empty");
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    throw std::invalid_argument("Poisson sampling: the sampling rate must be in (0, 1]");
  }
}

at::Tensor PoissonSampler::next() {
  const at::Tensor u = at::rand({n_}, generator_, at::TensorOptions().dtype(at::kDouble));
  return at::nonzero(u < q_).flatten();
}

at::Tensor PoissonSampler::state() const { return generator_.get_state(); }
void PoissonSampler::set_state(const at::Tensor& state) { generator_.set_state(state); }

}  // namespace privdiff::sdk::engine
