#pragma once
/// @file
/// Poisson subsampling: each logical step includes every example independently with probability q,
/// so batch sizes vary (and may be 0) around q N. This is the sampling the privacy analysis
/// (PoissonSampled events) assumes. Membership is drawn from a RandomStream (ChaCha20): with a
/// secret stream, the batches cannot be recovered by guessing a seed, which the subsampling
/// amplification of the accountants relies on.

#include <privdiff/engine/random_stream.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine {

class PRIVDIFF_SDK_API PoissonSampler {
 public:
  /// Throws std::invalid_argument unless dataset_size >= 1 and 0 < sampling_rate <= 1.
  PoissonSampler(std::int64_t dataset_size, double sampling_rate, RandomStream stream);
  /// The next logical batch: sorted int64 indices into the dataset; may be empty.
  at::Tensor next();
  double sampling_rate() const { return q_; }
  /// q N: what the summed gradient is divided by (never the realised batch size).
  double expected_batch_size() const { return q_ * static_cast<double>(n_); }
  bool is_secret() const { return stream_.is_secret(); }
  /// The stream's state, for checkpoints of reproducible runs (std::logic_error for a secret one).
  at::Tensor state() const { return stream_.state(); }
  void set_state(const at::Tensor& state) { stream_.set_state(state); }

 private:
  std::int64_t n_;
  double q_;
  RandomStream stream_;
};

}  // namespace privdiff::sdk::engine
