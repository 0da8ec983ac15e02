// The norm strategies of Linear and Conv2d (norm_strategy.hpp): per-example gradient norms without
// forming the per-example gradients (ghost), or with the library's own kernels (grouped convolution,
// gradient filter).
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/engine/per_example_rows.hpp>

#include "conv_patches.hpp"

#include <ATen/ATen.h>

namespace privdiff::sdk::engine {

namespace {

// sum over the example's positions s, t of <a_s, a_t> <g_s, g_t> = ||sum_t g_t a_t^T||^2, for
// a: [B, ..., T, D_a] and g: [B, ..., T, D_g] (leading dimensions after B: channel groups, summed).
// In float64: the terms can cancel (two near-equal positions with opposite loss weights), and
// float32 Gram entries then carry an error larger than the norm itself — an under-estimated norm is
// a clipped gradient above C. Where even float64 cannot resolve the cancellation (the result below
// 1e4 times its rounding bound, (D_a + D_g + T) u (sum_t ||a_t|| ||g_t||)^2), the example's gradient
// is formed in float64 instead — exact, since float32 products are exact in float64. Never negative.
at::Tensor ghost_squared_norms(const at::Tensor& a, const at::Tensor& g) {
  const at::Tensor a64 = a.to(at::kDouble), g64 = g.to(at::kDouble);
  const std::int64_t b = a.size(0);
  const at::Tensor gram_a = at::matmul(a64, a64.transpose(-1, -2));
  const at::Tensor gram_g = at::matmul(g64, g64.transpose(-1, -2));
  at::Tensor squared = (gram_a * gram_g).reshape({b, -1}).sum(1);
  const at::Tensor scale = (at::linalg_vector_norm(a64, 2, {-1}) * at::linalg_vector_norm(g64, 2, {-1})).reshape({b, -1}).sum(1);
  const double terms = static_cast<double>(a.size(-1) + g.size(-1) + a.size(-2));
  const at::Tensor unresolved = squared < 1e4 * terms * 1.2e-16 * scale * scale;
  if (unresolved.any().item<bool>()) {
    const at::Tensor rows = unresolved.nonzero().flatten();
    const at::Tensor exact = at::matmul(g64.index_select(0, rows).transpose(-1, -2), a64.index_select(0, rows));
    squared.index_copy_(0, rows, exact.reshape({rows.size(0), -1}).pow(2).sum(1));
  }
  return squared.clamp_min(0);
}

}  // namespace

// ---------------------------------------------------------------- Linear
std::vector<NormCandidate> Linear::norm_candidates(const CapturedCall& call, std::int64_t group) const {
  if (!is_trainable(weight)) return {{NormStrategy::materialised, 0.0}};
  const auto in = static_cast<double>(weight.size(1)), out = static_cast<double>(weight.size(0));
  const auto positions = static_cast<double>(call.saved.numel()) / static_cast<double>(call.saved.size(0)) / in *
                         static_cast<double>(group);
  return {{NormStrategy::materialised, positions * in * out}, {NormStrategy::ghost, positions * positions * (in + out)}};
}

std::vector<at::Tensor> Linear::per_example_squared_norms(const CapturedCall& call, const at::Tensor& g,
                                                          std::int64_t group, NormStrategy strategy) const {
  if (strategy != NormStrategy::ghost) return PerExampleLayer::per_example_squared_norms(call, g, group, strategy);
  const std::int64_t b = rows_per_example(call.saved, group);
  const at::Tensor gg = g.reshape({b, -1, weight.size(0)});
  std::vector<at::Tensor> out;
  if (is_trainable(weight)) {
    const at::Tensor a = call.saved.reshape({b, -1, weight.size(1)});
    if (a.size(1) == 1) {  // one position: the gradient is an outer product, ||g a^T|| = ||g|| ||a||
      out.push_back((squared_norms_of(a) * squared_norms_of(gg)));
    } else {
      out.push_back(ghost_squared_norms(a, gg));
    }
  }
  if (is_trainable(bias)) out.push_back(squared_norms_of(gg.sum(1)));
  return out;
}

// ---------------------------------------------------------------- Conv2d
std::vector<NormCandidate> Conv2d::norm_candidates(const CapturedCall& call, std::int64_t group) const {
  if (!is_trainable(weight)) return {{NormStrategy::materialised, 0.0}};
  const auto& o = options_;
  const auto& x = call.saved;
  auto out_size = [&](int d) {
    const std::int64_t extent = x.size(2 + d) + 2 * o.padding[d] - o.dilation[d] * (o.kernel[d] - 1) - 1;
    return static_cast<double>(extent / o.stride[d] + 1);
  };
  const double positions = out_size(0) * out_size(1) * static_cast<double>(group);
  const auto weights = static_cast<double>(weight.numel()), groups = static_cast<double>(o.groups);
  const double patch = static_cast<double>(o.in_channels / o.groups * o.kernel[0] * o.kernel[1]);
  const double outputs = static_cast<double>(o.out_channels / o.groups);
  std::vector<NormCandidate> candidates{{NormStrategy::materialised, positions * weights},
                                        {NormStrategy::grouped_convolution, positions * weights},
                                        {NormStrategy::ghost, groups * positions * positions * (patch + outputs)}};
  if (o.groups == 1) candidates.push_back({NormStrategy::gradient_filter, positions * weights});
  return candidates;
}

namespace {

// The examples as channel groups of one convolution, their K rows as its batch: the weight gradient
// of that convolution is every example's gradient, [B, C_out, C_in / G, kh, kw].
at::Tensor grouped_convolution_gradients(const Conv2dOptions& o, const at::Tensor& weight, const at::Tensor& x,
                                         const at::Tensor& g, std::int64_t group) {
  const std::int64_t b = rows_per_example(x, group);
  const at::Tensor xs = x.reshape({b, group, x.size(1), x.size(2), x.size(3)}).transpose(0, 1)
                            .reshape({group, b * x.size(1), x.size(2), x.size(3)});
  const at::Tensor gs = g.reshape({b, group, g.size(1), g.size(2), g.size(3)}).transpose(0, 1)
                            .reshape({group, b * g.size(1), g.size(2), g.size(3)});
  // Only the weight's shape matters for a weight gradient: uninitialised, not B copies of it.
  const at::Tensor weights = at::empty({b * weight.size(0), weight.size(1), weight.size(2), weight.size(3)}, weight.options());
  const at::Tensor per_example =
      std::get<1>(at::convolution_backward(gs, xs, weights, c10::nullopt, o.stride, o.padding, o.dilation, false,
                                           {0, 0}, b * o.groups, {false, true, false}));
  return per_example.reshape({b, o.out_channels, o.in_channels / o.groups, o.kernel[0], o.kernel[1]});
}

// grad_w[o, c, ky, kx] = sum over rows k and positions (i, j) of g[k, o, i, j] x[k, c, i s + ky d, j s + kx d]
// (x zero-padded): a forward convolution of x with the input channels as its batch and each
// example's output gradient as the filter of its group, stride and dilation swapped. Groups == 1.
at::Tensor gradient_filter_gradients(const Conv2dOptions& o, const at::Tensor& x, const at::Tensor& g,
                                     std::int64_t group) {
  const std::int64_t b = rows_per_example(x, group), c_in = x.size(1), c_out = g.size(1);
  const at::Tensor channels_as_batch = x.reshape({b, group, c_in, x.size(2), x.size(3)})
                                           .permute({2, 0, 1, 3, 4})
                                           .reshape({c_in, b * group, x.size(2), x.size(3)});
  const at::Tensor filters = g.reshape({b, group, c_out, g.size(2), g.size(3)})
                                 .permute({0, 2, 1, 3, 4})
                                 .reshape({b * c_out, group, g.size(2), g.size(3)});
  const at::Tensor taps = at::conv2d(channels_as_batch, filters, {}, o.dilation, o.padding, o.stride, b)
                              .narrow(2, 0, o.kernel[0])
                              .narrow(3, 0, o.kernel[1]);  // [C_in, B * C_out, kh, kw]
  return taps.reshape({c_in, b, c_out, o.kernel[0], o.kernel[1]}).permute({1, 2, 0, 3, 4}).contiguous();
}

}  // namespace

std::vector<at::Tensor> Conv2d::per_example_squared_norms(const CapturedCall& call, const at::Tensor& g,
                                                          std::int64_t group, NormStrategy strategy) const {
  if (strategy != NormStrategy::ghost) return PerExampleLayer::per_example_squared_norms(call, g, group, strategy);
  const auto& o = options_;
  std::vector<at::Tensor> out;
  if (is_trainable(weight)) {
    out.push_back(ghost_squared_norms(detail::conv_patches(o, call.saved, group).transpose(-1, -2),
                                      detail::conv_output_grad(o, g, group).transpose(-1, -2)));
  }
  if (is_trainable(bias)) out.push_back(squared_norms_of(detail::conv_output_grad(o, g, group).sum(-1)));
  return out;
}

std::vector<at::Tensor> Conv2d::per_example_by(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                               NormStrategy strategy) const {
  if (strategy == NormStrategy::materialised) return per_example(call, g, group);
  if (strategy != NormStrategy::grouped_convolution && strategy != NormStrategy::gradient_filter) return {};
  std::vector<at::Tensor> out;
  if (is_trainable(weight)) {
    out.push_back(strategy == NormStrategy::gradient_filter
                      ? gradient_filter_gradients(options_, call.saved, g, group)
                      : grouped_convolution_gradients(options_, weight, call.saved, g, group));
  }
  if (is_trainable(bias)) {
    out.push_back(detail::conv_output_grad(options_, g, group).sum(-1).reshape({rows_per_example(g, group), -1}));
  }
  return out;
}

}  // namespace privdiff::sdk::engine
