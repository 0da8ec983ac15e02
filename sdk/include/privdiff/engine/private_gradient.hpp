#pragma once
/// @file
/// One logical DP-SGD step's gradient, accumulated over physical chunks:
///   (sum_i clip(g_i) + N(0, (sigma C)^2 I)) / (q N)
/// Noise is added once, to the sum over the whole logical batch, and the sum is divided by the
/// *expected* batch size q N, never by the realised one (which would depend on the data).

#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <vector>

namespace privdiff::sdk::engine {

using sdk::Collective;

class PRIVDIFF_SDK_API PrivateGradient {
 public:
  /// `params` fixes the order of the gradients (trainable_parameters(model)). With `ranks` (a
  /// data-parallel run), each rank adds its own chunks and finish() sums over the ranks, the noise
  /// added once, by rank 0.
  PrivateGradient(std::vector<at::Tensor> params, double max_grad_norm, ClipMode mode, Collective* ranks = nullptr);

  /// Clips one physical chunk's per-example gradients and adds them to the running sum.
  void add(const PerExampleGradients& chunk);
  /// Adds a chunk that is already clipped and summed (clipped_gradient_sum, same C and mode).
  void add_clipped(const ClippedSum& chunk, std::int64_t num_examples);
  /// Adds N(0, (noise_multiplier * max_grad_norm)^2) to the sum (over every rank's chunks, the
  /// noise drawn on rank 0 only), divides by expected_batch_size and returns one gradient per
  /// parameter. Call once per logical step, on every rank.
  std::vector<at::Tensor> finish(double noise_multiplier, double expected_batch_size, GaussianNoise& noise);
  /// Writes finish(...) into each parameter's .grad.
  void finish_into_grads(double noise_multiplier, double expected_batch_size, GaussianNoise& noise);

  std::int64_t examples() const { return examples_; }

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> sums_;
  double max_grad_norm_;
  ClipMode mode_;
  Collective* ranks_ = nullptr;
  std::int64_t examples_ = 0;
  bool finished_ = false;
};

}  // namespace privdiff::sdk::engine
