#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/precision.hpp>

#include "clipped_sum_parts.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
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

// Per-example gradients a slice's norm strategies formed anyway (materialised, grouped convolution),
// kept to be summed with the slice's clip factors — one matrix-vector product per parameter — instead
// of a second weight-gradient pass over the chunk. Bounded: a slice keeps at most `budget` bytes.
struct KeptGradients {
  static constexpr std::int64_t budget = std::int64_t{256} << 20;
  std::map<PerExampleLayer*, std::vector<at::Tensor>> of;
  std::int64_t bytes = 0;
  struct Covered {
    at::Tensor examples;     // [n] bool: summed already
    std::int64_t count = 0;  // how many (kept on the host: no device read-back per layer)
  };
  std::map<PerExampleLayer*, Covered> covered;
};

// The squared norms [len, P] of examples [start, start + len), layer by layer; the per-example
// gradients formed on the way go to `kept` while its budget lasts.
at::Tensor squared_norms_of_slice(const ChunkLayers& chunk, std::int64_t start, std::int64_t len, std::int64_t group,
                                  const std::vector<at::Tensor>& params, NormPlanner& planner, KeptGradients& kept) {
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
      const std::int64_t bytes = detail::gradient_bytes(layer_params, len);
      std::vector<at::Tensor> gradients;
      const auto norms = planner.squared_norms(*layer, part_of(layer_calls[0]), grad_of(layer_calls[0]), group,
                                               kept.bytes + bytes <= KeptGradients::budget ? &gradients : nullptr);
      for (std::size_t j = 0; j < layer_params.size(); ++j) add(chunk.position(layer_params[j]), norms[j]);
      if (!gradients.empty()) {
        kept.bytes += bytes;
        kept.of[layer] = std::move(gradients);
      }
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

// Sums a slice's kept per-example gradients with its clip factors (clip factors are per example, so
// a slice's are final once its norms are) and marks those examples done for their layers.
void sum_kept_gradients(const ChunkLayers& chunk, KeptGradients& kept, const at::Tensor& squared,
                        const at::Tensor& factors, std::int64_t start, std::int64_t n, ClipMode mode,
                        std::vector<at::Tensor>& sums) {
  RECORD_USER_SCOPE("privdiff::sum_kept_gradients");
  const std::int64_t len = squared.size(0);
  // Rows of examples whose norm is not finite are zeroed, not scaled: 0 times infinity is NaN.
  const at::Tensor not_finite = finite_examples(squared).logical_not().unsqueeze(1);
  const bool all_finite = !not_finite.any().item<bool>();
  for (auto& [layer, gradients] : kept.of) {
    const auto layer_params = layer->trainable_parameters();
    for (std::size_t j = 0; j < layer_params.size(); ++j) {
      const std::int64_t p = chunk.position(layer_params[j]);
      at::Tensor rows = gradients[j].reshape({len, -1});
      if (!all_finite) rows = rows.masked_fill(not_finite, 0);
      const at::Tensor f = (mode == ClipMode::flat ? factors : factors.select(1, p)).to(rows.scalar_type());
      at::Tensor sum = at::matmul(f.unsqueeze(0), rows).reshape(layer_params[j].sizes()).to(layer_params[j].scalar_type());
      at::Tensor& slot = sums[static_cast<std::size_t>(p)];
      if (slot.defined()) slot.add_(sum);
      else slot = std::move(sum);
    }
    auto [covered, first] = kept.covered.try_emplace(layer);
    if (first) covered->second.examples = at::zeros({n}, at::TensorOptions(at::kBool).device(squared.device()));
    covered->second.examples.narrow(0, start, len).fill_(true);
    covered->second.count += len;
  }
  kept.of.clear();
  kept.bytes = 0;
}

}  // namespace

ClippedSum clipped_gradient_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t n, std::int64_t group,
                                double max_grad_norm, ClipMode mode, const ClipRule& rule) {
  NormPlanner planner;
  return clipped_gradient_sum(model, loss, n, group, max_grad_norm, mode, planner, rule);
}

ClippedSum clipped_gradient_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t n, std::int64_t group,
                                double max_grad_norm, ClipMode mode, NormPlanner& planner, const ClipRule& rule) {
  if (!(max_grad_norm > 0)) throw std::invalid_argument("max_grad_norm must be > 0");
  if (!has_closed_form(model) || n == 0) {
    return clip_and_sum(per_example_gradients(model, loss, n, group), max_grad_norm, mode, rule);
  }
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto start = Clock::now();
  const std::vector<at::Tensor> params = trainable_parameters(model);
  const BackwardToOutputs backward = [&] {
    RECORD_USER_SCOPE("privdiff::backward_to_layer_outputs");  // named in profiles (engine_bench)
    return backward_to_layer_outputs(loss, n, group);
  }();
  const double forward_backward = since(start);
  // The layers' saved inputs are attached to this chunk's graph: without this guard the norms, clip
  // factors and clipped sums would be too, and a logical step summing its chunks would keep every
  // chunk's activations alive (memory growing with the logical batch, not the physical one).
  at::NoGradGuard no_grad;
  const StrictFloat32Scope strict;  // norms and sums rounded alike: no TF32 (precision.hpp)
  const ChunkLayers chunk(backward, params);

  // 1. Per-example squared norms, one slice of examples at a time (detail::norm_slice).
  const std::int64_t slice = detail::norm_slice(params.front().device(), n);
  std::vector<at::Tensor> slices, slice_factors;
  ClippedSum out;
  out.sums.resize(params.size());
  KeptGradients kept;
  for (std::int64_t start = 0; start < n; start += slice) {
    RECORD_USER_SCOPE("privdiff::norms_of_slice");
    slices.push_back(squared_norms_of_slice(chunk, start, std::min(slice, n - start), group, params, planner, kept));
    slice_factors.push_back(clip_factors(slices.back(), max_grad_norm, mode, rule));  // per example: final per slice
    if (!kept.of.empty()) sum_kept_gradients(chunk, kept, slices.back(), slice_factors.back(), start, n, mode, out.sums);
  }
  const at::Tensor squared = at::cat(slices, 0);
  out.seconds["forward_backward"] = forward_backward;
  out.norms = squared.sum(1).sqrt();
  out.factors = at::cat(slice_factors, 0);
  // An example whose norm is not finite has factor 0; its rows are zeroed in what the sums read,
  // since 0 times infinity is NaN (clipping.hpp).
  const at::Tensor finite = finite_examples(squared);
  const bool all_finite = finite.all().item<bool>();
  out.seconds["norms"] = since(start) - forward_backward;
  start = Clock::now();

  // 2. Clipped sums with the library's summed-gradient kernels, for the examples of each layer whose
  //    per-example gradients were not summed in step 1.
  RECORD_USER_SCOPE("privdiff::clipped_sums");
  for (const auto& [layer, calls] : chunk.calls_of) {
    const auto layer_params = layer->trainable_parameters();
    const auto covered = kept.covered.find(layer);
    if (covered != kept.covered.end() && covered->second.count == n) continue;
    std::vector<at::Tensor> scales;
    for (const auto& p : layer_params) {
      at::Tensor scale = mode == ClipMode::flat ? out.factors : out.factors.select(1, chunk.position(p));
      if (covered != kept.covered.end()) scale = scale.masked_fill(covered->second.examples, 0);
      scales.push_back(scale);
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
  out.seconds["clipped_sum"] = since(start);
  return out;
}

}  // namespace privdiff::sdk::engine
