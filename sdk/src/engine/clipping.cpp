#include <privdiff/engine/clipping.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::engine {

ClipMode clip_mode_from_string(const std::string& name) {
  if (name == "flat") return ClipMode::flat;
  if (name == "per_layer") return ClipMode::per_layer;
  throw std::invalid_argument("clipping must be \"flat\" or \"per_layer\", got \"" + name + "\"");
}

at::Tensor clip_factors(const at::Tensor& squared, double max_grad_norm, ClipMode mode) {
  if (mode == ClipMode::flat) return (max_grad_norm / (squared.sum(1).sqrt() + 1e-6)).clamp_max(1.0);
  const double per_tensor = max_grad_norm / std::sqrt(static_cast<double>(std::max<std::int64_t>(squared.size(1), 1)));
  return (per_tensor / (squared.sqrt() + 1e-6)).clamp_max(1.0);
}

ClippedSum clip_and_sum(const PerExampleGradients& g, double max_grad_norm, ClipMode mode) {
  if (!(max_grad_norm > 0)) throw std::invalid_argument("max_grad_norm must be > 0");
  ClippedSum out;
  const std::int64_t b = g.num_examples;
  const std::size_t p = g.params.size();
  const auto options = p ? g.grads[0].options() : at::TensorOptions().dtype(at::kFloat);
  // Squared norm of each example's gradient, per parameter tensor: [B, P], reduced in the
  // gradients' own dtype (no float64 copies of B x #params values) and kept in float64.
  at::Tensor squared = at::zeros({b, static_cast<std::int64_t>(p)}, options.dtype(at::kDouble));
  for (std::size_t j = 0; j < p; ++j) {
    squared.select(1, static_cast<std::int64_t>(j)).copy_(squared_norms_of(g.grads[j]));
  }
  out.norms = squared.sum(1).sqrt();
  out.factors = clip_factors(squared, max_grad_norm, mode);
  for (std::size_t j = 0; j < p; ++j) {
    const at::Tensor f = (mode == ClipMode::flat ? out.factors : out.factors.select(1, static_cast<std::int64_t>(j)))
                             .to(g.grads[j].scalar_type());
    // sum_i f_i g_i as one matrix-vector product: no [B, ...] temporary.
    out.sums.push_back(at::matmul(f.unsqueeze(0), g.grads[j].reshape({b, -1})).reshape(g.params[j].sizes()));
  }
  return out;
}

}  // namespace privdiff::sdk::engine
