#include <privdiff/engine/fast_gradient_clipping.hpp>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <map>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

// One chunk's captured calls, grouped by layer, with where each parameter sits in the result.
struct ChunkLayers {
  const BackwardToOutputs& backward;
  std::map<const void*, std::int64_t> index;             // parameter -> position in the result
  std::map<PerExampleLayer*, std::vector<std::size_t>> calls_of;  // a layer's calls that reached the loss
  std::map<std::int64_t, int> owners;                    // parameter -> layers using it (> 1: tied)

  ChunkLayers(const BackwardToOutputs& b, const std::vector<at::Tensor>& params) : backward(b) {
    for (std::size_t j = 0; j < params.size(); ++j) index[params[j].unsafeGetTensorImpl()] = static_cast<std::int64_t>(j);
    for (std::size_t c = 0; c < b.calls.size(); ++c) {
      if (b.output_grads[c].defined()) calls_of[b.calls[c].layer].push_back(c);
    }
    for (const auto& [layer, calls] : calls_of) {
      for (const auto& p : layer->trainable_parameters()) ++owners[position(p)];
    }
  }
  std::int64_t position(const at::Tensor& p) const { return index.at(p.unsafeGetTensorImpl()); }
  // A layer called once whose parameters are its own: any norm strategy applies. Otherwise the norm
  // is that of a sum (of calls, or of the layers sharing a parameter), which needs the gradients.
  bool owns_its_norms(PerExampleLayer* layer) const {
    if (calls_of.at(layer).size() != 1) return false;
    for (const auto& p : layer->trainable_parameters()) {
      if (owners.at(position(p)) != 1) return false;
    }
    return true;
  }
};

// The squared norms [len, P] of examples [start, start + len), layer by layer.
at::Tensor squared_norms_of_slice(const ChunkLayers& chunk, std::int64_t start, std::int64_t len, std::int64_t group,
                                  const std::vector<at::Tensor>& params, NormPlanner& planner) {
  const auto& calls = chunk.backward.calls;
  auto part_of = [&](std::size_t c) {
    return CapturedCall{calls[c].layer, calls[c].saved.narrow(0, start * group, len * group), calls[c].output,
                        calls[c].output_version};
  };
  auto grad_of = [&](std::size_t c) { return chunk.backward.output_grads[c].narrow(0, start * group, len * group); };
  std::vector<at::Tensor> columns(params.size());  // one [len] column per parameter, stacked once
  auto add = [&](std::int64_t p, const at::Tensor& values) {
    auto& column = columns[static_cast<std::size_t>(p)];
    column = column.defined() ? column + values : values;
  };
  std::map<std::int64_t, at::Tensor> shared;  // tied parameter -> its summed per-example slice
  for (const auto& [layer, layer_calls] : chunk.calls_of) {
    const auto layer_params = layer->trainable_parameters();
    if (chunk.owns_its_norms(layer)) {
      const auto norms = planner.squared_norms(*layer, part_of(layer_calls[0]), grad_of(layer_calls[0]), group);
      for (std::size_t j = 0; j < layer_params.size(); ++j) add(chunk.position(layer_params[j]), norms[j]);
      continue;
    }
    std::vector<at::Tensor> per_example;
    for (std::size_t c : layer_calls) {
      auto contribution = layer->per_example(part_of(c), grad_of(c), group);
      if (per_example.empty()) per_example = std::move(contribution);
      else for (std::size_t j = 0; j < contribution.size(); ++j) per_example[j].add_(contribution[j]);
    }
    for (std::size_t j = 0; j < layer_params.size(); ++j) {
      const std::int64_t p = chunk.position(layer_params[j]);
      if (chunk.owners.at(p) == 1) {
        add(p, squared_norms_of(per_example[j]));
        continue;
      }
      auto [it, first] = shared.emplace(p, per_example[j]);
      if (!first) it->second = it->second + per_example[j];
    }
  }
  for (const auto& [p, g] : shared) add(p, squared_norms_of(g));
  const auto doubles = at::TensorOptions(at::kDouble).device(params.front().device());
  for (auto& column : columns) {
    if (!column.defined()) column = at::zeros({len}, doubles);  // parameters that did not reach the loss
  }
  return at::stack(columns, 1);
}

}  // namespace

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
  const BackwardToOutputs backward = backward_to_layer_outputs(loss, n, group);
  // The layers' saved inputs are attached to this chunk's graph: without this guard the norms, clip
  // factors and clipped sums would be too, and a logical step summing its chunks would keep every
  // chunk's activations alive (memory growing with the logical batch, not the physical one).
  at::NoGradGuard no_grad;
  const ChunkLayers chunk(backward, params);

  // 1. Per-example squared norms, one slice of examples at a time: slices keep the working set
  //    (patches, per-example gradients, Gram matrices) cache-sized, which matters more on CPUs than
  //    the size of the matrix products; on a GPU, wide slices keep it busy.
  const std::int64_t slice = params.front().device().is_cuda() ? 256 : 16;
  std::vector<at::Tensor> slices;
  for (std::int64_t start = 0; start < n; start += slice) {
    slices.push_back(squared_norms_of_slice(chunk, start, std::min(slice, n - start), group, params, planner));
  }
  const at::Tensor squared = at::cat(slices, 0);
  ClippedSum out;
  out.norms = squared.sum(1).sqrt();
  out.factors = clip_factors(squared, max_grad_norm, mode);
  // An example whose norm is not finite has factor 0; its rows are zeroed in what the sums read,
  // since 0 times infinity is NaN (clipping.hpp).
  const at::Tensor finite = finite_examples(squared);
  const bool all_finite = finite.all().item<bool>();

  // 2. Clipped sums with the library's summed-gradient kernels.
  out.sums.resize(params.size());
  for (const auto& [layer, calls] : chunk.calls_of) {
    const auto layer_params = layer->trainable_parameters();
    std::vector<at::Tensor> scales;
    for (const auto& p : layer_params) {
      scales.push_back(mode == ClipMode::flat ? out.factors : out.factors.select(1, chunk.position(p)));
    }
    for (std::size_t c : calls) {
      CapturedCall call = backward.calls[c];
      at::Tensor output_grad = backward.output_grads[c];
      if (!all_finite) {
        call.saved = zero_examples_not_kept(call.saved, finite, group);
        output_grad = zero_examples_not_kept(output_grad, finite, group);
      }
      auto sums = layer->scaled_sum(call, output_grad, group, scales);
      for (std::size_t j = 0; j < sums.size(); ++j) {
        at::Tensor& slot = out.sums[static_cast<std::size_t>(chunk.position(layer_params[j]))];
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
