#include <privdiff/engine/clipping.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace privdiff::sdk::engine {

ClipMode clip_mode_from_string(const std::string& name) {
  if (name == "flat") return ClipMode::flat;
  if (name == "per_layer") return ClipMode::per_layer;
  throw std::invalid_argument("clipping must be \"flat\" or \"per_layer\", got \"" + name + "\"");
}

at::Tensor finite_examples(const at::Tensor& squared) { return at::isfinite(squared).all(1); }

at::Tensor zero_examples_not_kept(const at::Tensor& rows, const at::Tensor& keep, std::int64_t group) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(rows.dim()), 1);
  shape[0] = rows.size(0);
  const at::Tensor mask = keep.to(rows.device()).repeat_interleave(group).reshape(shape);
  return at::where(mask, rows, at::zeros({}, rows.options()));
}

at::Tensor clip_factors(const at::Tensor& squared, double max_grad_norm, ClipMode mode) {
  const at::Tensor finite = finite_examples(squared);
  const at::Tensor zero = at::zeros({}, squared.options());
  const at::Tensor safe = at::where(finite.unsqueeze(1), squared.clamp_min(0), zero);
  if (mode == ClipMode::flat) return at::where(finite, (max_grad_norm / (safe.sum(1).sqrt() + 1e-6)).clamp_max(1.0), zero);
  const double per_tensor = max_grad_norm / std::sqrt(static_cast<double>(std::max<std::int64_t>(squared.size(1), 1)));
  return at::where(finite.unsqueeze(1), (per_tensor / (safe.sqrt() + 1e-6)).clamp_max(1.0), zero);
}

namespace {

// One example's factor ([1] or [1, P]) from a mechanism's rule, given a copy of its row (a rule that
// writes into its input changes nothing the engine uses). Undefined: the standard rule.
at::Tensor row_factors(const ClipRule& rule, const at::Tensor& safe, std::int64_t i, bool flat) {
  at::Tensor f = rule(safe.narrow(0, i, 1).clone());
  if (!f.defined()) return f;
  f = f.to(safe.options());
  const std::int64_t p = safe.size(1);
  if (!flat && f.dim() == 1) f = f.unsqueeze(1).expand({1, p});
  if (f.sizes() != (flat ? at::IntArrayRef{1} : at::IntArrayRef{1, p})) {
    throw std::invalid_argument("a clip rule must return one factor per example" +
                                std::string(flat ? "" : " (or per example and parameter tensor)"));
  }
  return f;
}

}  // namespace

at::Tensor clip_factors(const at::Tensor& squared, double max_grad_norm, ClipMode mode, const ClipRule& rule) {
  const std::int64_t b = squared.size(0), p = squared.size(1);
  if (!rule || b == 0) return clip_factors(squared, max_grad_norm, mode);
  const at::Tensor finite = finite_examples(squared);
  const at::Tensor zero = at::zeros({}, squared.options());
  const at::Tensor safe = at::where(finite.unsqueeze(1), squared.clamp_min(0), zero);
  const bool flat = mode == ClipMode::flat;
  // The most each factor may be: the one that brings the norm to C' (no min(1, .): a rule may scale
  // small gradients up, as automatic clipping does), with a floor of 1e-3 C' under the norm, so
  // that a norm computed a little low (ghost norms' cancellation) cannot be magnified without end.
  const double bound = flat ? max_grad_norm : max_grad_norm / std::sqrt(static_cast<double>(std::max<std::int64_t>(p, 1)));
  const at::Tensor cap = bound / ((flat ? safe.sum(1) : safe).sqrt() + 1e-3 * bound);
  // Example by example: a factor may depend on its own example's norms only. A rule that saw the
  // batch (a median, a batch maximum) would let one record move every other record's contribution.
  at::Tensor first = row_factors(rule, safe, 0, flat);
  if (!first.defined()) return clip_factors(squared, max_grad_norm, mode);
  std::vector<at::Tensor> rows{first};
  for (std::int64_t i = 1; i < b; ++i) {
    rows.push_back(row_factors(rule, safe, i, flat));
    if (!rows.back().defined()) throw std::invalid_argument("a clip rule returned no factor for one example only");
  }
  at::Tensor factors = at::cat(rows, 0);
  factors = at::where(at::isnan(factors), zero, at::minimum(factors, cap).clamp_min(0));
  return at::where(flat ? finite : finite.unsqueeze(1), factors, zero);
}

ClippedSum clip_and_sum(const PerExampleGradients& g, double max_grad_norm, ClipMode mode, const ClipRule& rule) {
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
  out.factors = clip_factors(squared, max_grad_norm, mode, rule);
  const at::Tensor finite = finite_examples(squared);
  const bool all_finite = b == 0 || finite.all().item<bool>();
  for (std::size_t j = 0; j < p; ++j) {
    const at::Tensor f = (mode == ClipMode::flat ? out.factors : out.factors.select(1, static_cast<std::int64_t>(j)))
                             .to(g.grads[j].scalar_type());
    const at::Tensor flat = g.grads[j].reshape({b, -1});
    const at::Tensor rows = all_finite ? flat : zero_examples_not_kept(flat, finite, 1);
    // sum_i f_i g_i as one matrix-vector product: no [B, ...] temporary.
    out.sums.push_back(at::matmul(f.unsqueeze(0), rows).reshape(g.params[j].sizes()));
  }
  return out;
}

}  // namespace privdiff::sdk::engine
