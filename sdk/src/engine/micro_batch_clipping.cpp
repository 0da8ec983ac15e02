#include <privdiff/engine/micro_batch_clipping.hpp>
#include <privdiff/engine/per_example_rows.hpp>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <stdexcept>

namespace privdiff::sdk::engine {

ClippedSum micro_batch_clipped_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t n, std::int64_t group,
                                   double max_grad_norm, ClipMode mode, const ClipRule& rule) {
  if (!(max_grad_norm > 0)) throw std::invalid_argument("max_grad_norm must be > 0");
  const std::vector<at::Tensor> params = trainable_parameters(model);
  const auto p = static_cast<std::int64_t>(params.size());
  const auto device = params.empty() ? c10::Device(c10::kCPU) : params.front().device();
  const auto doubles = at::TensorOptions(device).dtype(at::kDouble);
  ClippedSum out;
  for (const auto& param : params) out.sums.push_back(at::zeros_like(param, param.options().requires_grad(false)));
  at::Tensor squared = at::zeros({n, p}, doubles);
  out.factors = mode == ClipMode::flat ? at::zeros({n}, doubles) : at::zeros({n, p}, doubles);
  for (std::int64_t i = 0; i < n; ++i) {
    const at::Tensor example_loss = example_means(loss(at::full({1}, i, at::kLong)), 1, group).sum();
    const auto grads = torch::autograd::grad({example_loss}, params, {}, false, false, /*allow_unused=*/true);
    at::NoGradGuard no_grad;  // the example's graph is freed here; nothing below joins it
    // Few, whole-tensor operations per parameter: a step makes B x #tensors of them.
    std::vector<at::Tensor> norms;
    for (const auto& g : grads) norms.push_back(g.defined() ? at::linalg_vector_norm(g, 2) : at::zeros({}, doubles));
    const at::Tensor row = at::stack(norms).to(at::kDouble).pow(2);
    squared[i].copy_(row);
    const at::Tensor factors = clip_factors(row.unsqueeze(0), max_grad_norm, mode, rule)[0];
    out.factors[i].copy_(factors);
    const at::Tensor on_cpu = factors.to(at::kCPU).reshape({-1});
    const double* f = on_cpu.data_ptr<double>();
    for (std::size_t j = 0; j < grads.size(); ++j) {
      const double factor = mode == ClipMode::flat ? f[0] : f[j];
      // Factor 0: a norm that is not finite (clip_factors); adding 0 times it would be NaN.
      if (grads[j].defined() && factor > 0) out.sums[j].add_(grads[j], factor);
    }
  }
  out.norms = squared.sum(1).sqrt();
  return out;
}

}  // namespace privdiff::sdk::engine
