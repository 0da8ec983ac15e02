#pragma once
/// @file
/// Poisson subsampling: each logical step includes every example independently with probability q,
/// so batch sizes vary (and may be 0) around q N. This is the sampling the privacy analysis
/// (PoissonSampled events) assumes.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine {

class PRIVDIFF_SDK_API PoissonSampler {
 public:
  /// Throws std::invalid_argument unless dataset_size >= 1 and 0 < sampling_rate <= 1.
  PoissonSampler(std::int64_t dataset_size, double sampling_rate, std::uint64_t seed);
  /// The next logical batch: sorted int64 indices into the dataset; may be empty.
  at::Tensor next();
  double sampling_rate() const { return q_; }
  /// q N: what the summed gradient is divided by (never the realised batch size).
  double expected_batch_size() const { return q_ * static_cast<double>(n_); }
  /// The generator's state, for checkpoints (restore with set_state).
  at::Tensor state() const;
  void set_state(const at::Tensor& state);

 private:
  std::int64_t n_;
  double q_;
  at::Generator generator_;
};

}  // namespace privdiff::sdk::engine
