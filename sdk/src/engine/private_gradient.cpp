#include <privdiff/engine/private_gradient.hpp>

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::sdk::engine {

PrivateGradient::PrivateGradient(std::vector<at::Tensor> params, double max_grad_norm, ClipMode mode,
                                 Collective* ranks)
    : params_(std::move(params)), max_grad_norm_(max_grad_norm), mode_(mode), ranks_(ranks) {
  if (!(max_grad_norm > 0)) throw std::invalid_argument("max_grad_norm must be > 0");
  for (const auto& p : params_) sums_.push_back(at::zeros_like(p, p.options().requires_grad(false)));
}

void PrivateGradient::add(const PerExampleGradients& chunk) {
  if (finished_) throw std::logic_error("PrivateGradient: add() after finish()");
  if (chunk.num_examples == 0) return;
  if (chunk.params.size() != params_.size()) throw std::invalid_argument("PrivateGradient: parameter mismatch");
  add_clipped(clip_and_sum(chunk, max_grad_norm_, mode_), chunk.num_examples);
}

void PrivateGradient::add_clipped(const ClippedSum& chunk, std::int64_t num_examples) {
  if (finished_) throw std::logic_error("PrivateGradient: add after finish()");
  if (num_examples == 0) return;
  if (chunk.sums.size() != sums_.size()) throw std::invalid_argument("PrivateGradient: parameter mismatch");
  at::_foreach_add_(sums_, chunk.sums);
  examples_ += num_examples;
}

std::vector<at::Tensor> PrivateGradient::finish(double noise_multiplier, double expected_batch_size,
                                                GaussianNoise& noise) {
  if (finished_) throw std::logic_error("PrivateGradient: finish() twice");
  if (!(noise_multiplier >= 0)) throw std::invalid_argument("noise_multiplier must be >= 0");
  if (!(expected_batch_size > 0)) throw std::invalid_argument("the expected batch size must be > 0");
  finished_ = true;
  if (ranks_) {
    // Noise once per logical step, not once per rank: rank 0 adds it to its part of the sum before
    // the all-reduce (one collective), the others add none.
    if (ranks_->rank() == 0) at::_foreach_add_(sums_, noise.sample_all(sums_, noise_multiplier * max_grad_norm_));
    ranks_->all_reduce_sum(sums_);
    return at::_foreach_div(sums_, expected_batch_size);
  }
  // Every parameter's noise in one go (on a GPU: one keystream and one transform, not one per tensor),
  // added and divided in multi-tensor operations (on a GPU: a few kernels, not two per tensor).
  std::vector<at::Tensor> out = at::_foreach_add(sums_, noise.sample_all(sums_, noise_multiplier * max_grad_norm_));
  at::_foreach_div_(out, expected_batch_size);
  return out;
}

void PrivateGradient::finish_into_grads(double noise_multiplier, double expected_batch_size, GaussianNoise& noise) {
  auto grads = finish(noise_multiplier, expected_batch_size, noise);
  for (std::size_t j = 0; j < params_.size(); ++j) params_[j].mutable_grad() = grads[j];
}

}  // namespace privdiff::sdk::engine
