#include <privdiff/engine/fast_gradient_clipping.hpp>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <map>
#include <stdexcept>

namespace privdiff::sdk::engine {

ClippedSum clipped_gradient_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t n, std::int64_t group,
                                double max_grad_norm, ClipMode mode) {
  NormPlanner planner;
  return clipped_gradient_sum(model, loss, n, group, max_grad_norm, mode, planner);
}

ClippedSum clipped_gradient_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t n, std::int64_t group,
                                double max_grad_norm, ClipMode mode, NormPlanner& planner) {
  if (!(max_grad_norm > 0)) throw std::invalid_argument("max_grad_norm must be > 0");
  if (!has_closed_form(model) || n == 0) {
    return clip_and_sum(per_example_gradients(model, loss, n, group), max_grad_norm, mode);
  }
  const std::vector<at::Tensor> params = trainable_parameters(model);
  std::map<const void*, std::int64_t> index;
  for (std::size_t j = 0; j < params.size(); ++j) index[params[j].unsafeGetTensorImpl()] = static_cast<std::int64_t>(j);

  const BackwardToOutputs backward = backward_to_layer_outputs(loss, n, group);
  // The layers' saved inputs are attached to this chunk's graph: without this guard the norms, clip
  // factors and clipped sums would be too, and a logical step summing its chunks would keep every
  // chunk's activations alive (memory growing with the logical batch, not the physical one).
  at::NoGradGuard no_grad;
  const auto& calls_made = backward.calls;
  const auto& output_grads = backward.output_grads;

  // The calls of each layer (a layer used twice contributes the sum of both calls per example).
  std::map<PerExampleLayer*, std::vector<std::size_t>> calls_of;
  for (std::size_t c = 0; c < calls_made.size(); ++c) {
    if (output_grads[c].defined()) calls_of[calls_made[c].layer].push_back(c);
  }

  // Layers per parameter: a parameter shared by several layers (tied weights) has the *sum* of
  // their contributions as its per-example gradient, and its norm is the norm of that sum.
  std::map<std::int64_t, int> owners;
  for (const auto& [layer, calls] : calls_of) {
    for (const auto& p : layer->trainable_parameters()) ++owners[index.at(p.unsafeGetTensorImpl())];
  }

  // 1. Per-example squared norms, one slice of examples at a time, layer by layer: slices keep the
  //    working set (patches, per-example gradients) cache-sized, which matters more on CPUs than
  //    the size of the matrix products. A layer called once whose parameters are its own takes the
  //    planner's strategy (ghost, grouped convolution or materialised); a layer called several
  //    times, or sharing a parameter, has the norm of a *sum* and materialises its per-example
  //    gradients (only a shared parameter's slice is held across layers).
  //    On a GPU, wide slices keep it busy (its memory holds slice x #params floats easily).
  const auto device = params.front().device();
  const std::int64_t slice = device.is_cuda() ? 256 : 16;
  at::Tensor squared = at::zeros({n, static_cast<std::int64_t>(params.size())}, at::TensorOptions(device).dtype(at::kDouble));
  auto add_squared = [&](std::int64_t p, std::int64_t start, const at::Tensor& values) {
    squared.select(1, p).narrow(0, start, values.size(0)).add_(values);
  };
  for (std::int64_t start = 0; start < n; start += slice) {
    const std::int64_t len = std::min(slice, n - start);
    auto part_of = [&](std::size_t c) {
      const CapturedCall& call = calls_made[c];
      return CapturedCall{call.layer, call.saved.narrow(0, start * group, len * group), call.output, call.output_version};
    };
    auto grad_of = [&](std::size_t c) { return output_grads[c].narrow(0, start * group, len * group); };
    std::map<std::int64_t, at::Tensor> shared;  // parameter index -> summed per-example slice
    for (const auto& [layer, calls] : calls_of) {
      const auto layer_params = layer->trainable_parameters();
      bool own = calls.size() == 1;
      for (const auto& p : layer_params) own = own && owners.at(index.at(p.unsafeGetTensorImpl())) == 1;
      if (own) {
        const auto norms = planner.squared_norms(*layer, part_of(calls[0]), grad_of(calls[0]), group);
        for (std::size_t j = 0; j < layer_params.size(); ++j) add_squared(index.at(layer_params[j].unsafeGetTensorImpl()), start, norms[j]);
        continue;
      }
      std::vector<at::Tensor> per_example;
      for (std::size_t c : calls) {
        auto contribution = layer->per_example(part_of(c), grad_of(c), group);
        if (per_example.empty()) per_example = std::move(contribution);
        else for (std::size_t j = 0; j < contribution.size(); ++j) per_example[j].add_(contribution[j]);
      }
      for (std::size_t j = 0; j < layer_params.size(); ++j) {
        const std::int64_t p = index.at(layer_params[j].unsafeGetTensorImpl());
        if (owners.at(p) == 1) {
          add_squared(p, start, squared_norms_of(per_example[j]));
          continue;
        }
        auto [it, first] = shared.emplace(p, per_example[j]);
        if (!first) it->second = it->second + per_example[j];
      }
    }
    for (const auto& [p, g] : shared) add_squared(p, start, squared_norms_of(g));
  }

  ClippedSum out;
  out.norms = squared.sum(1).sqrt();
  out.factors = clip_factors(squared, max_grad_norm, mode);

  // 2. Clipped sums with the library's summed-gradient kernels.
  out.sums.resize(params.size());
  for (const auto& [layer, calls] : calls_of) {
    const auto layer_params = layer->trainable_parameters();
    std::vector<at::Tensor> scales;
    for (const auto& p : layer_params) {
      scales.push_back(mode == ClipMode::flat ? out.factors : out.factors.select(1, index.at(p.unsafeGetTensorImpl())));
    }
    for (std::size_t c : calls) {
      auto sums = layer->scaled_sum(calls_made[c], output_grads[c], group, scales);
      for (std::size_t j = 0; j < sums.size(); ++j) {
        at::Tensor& slot = out.sums[static_cast<std::size_t>(index.at(layer_params[j].unsafeGetTensorImpl()))];
        if (slot.defined()) slot.add_(sums[j]);
        else slot = std::move(sums[j]);
      }
    }
  }
  for (std::size_t j = 0; j < params.size(); ++j) {
    if (!out.sums[j].defined()) out.sums[j] = at::zeros_like(params[j], params[j].options().requires_grad(false));
  }
  return out;
}

}  // namespace privdiff::sdk::engine
