#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_rows.hpp>

#include "clipped_sum_parts.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/types.h>

#include <atomic>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

std::vector<at::Tensor> zero_grads(const std::vector<at::Tensor>& params, std::int64_t n) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    std::vector<std::int64_t> shape{n};
    shape.insert(shape.end(), p.sizes().begin(), p.sizes().end());
    grads.push_back(at::zeros(shape, p.options().requires_grad(false)));
  }
  return grads;
}

}  // namespace

std::vector<at::Tensor> trainable_parameters(torch::nn::Module& model) {
  std::vector<at::Tensor> out;
  std::set<const void*> seen;  // a tensor registered in two modules (tied weights) is one parameter
  for (const auto& p : model.parameters()) {
    if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) out.push_back(p);
  }
  return out;
}

bool has_closed_form(torch::nn::Module& model) {
  std::map<const void*, bool> covered;
  auto cover = [&](torch::nn::Module* m) {
    if (auto* layer = dynamic_cast<PerExampleLayer*>(m)) {
      for (const auto& p : layer->trainable_parameters()) covered[p.unsafeGetTensorImpl()] = true;
    }
  };
  cover(&model);  // (modules() can only include the root when it is held by a shared_ptr)
  for (const auto& m : model.modules(/*include_self=*/false)) cover(m.get());
  for (const auto& p : trainable_parameters(model)) {
    if (!covered.count(p.unsafeGetTensorImpl())) return false;
  }
  return true;
}

PerExampleGradients micro_batch_per_example_gradients(torch::nn::Module& model, const RowLoss& loss,
                                                      std::int64_t n, std::int64_t group) {
  PerExampleGradients out;
  out.params = trainable_parameters(model);
  out.grads = zero_grads(out.params, n);
  out.num_examples = n;
  for (std::int64_t i = 0; i < n; ++i) {
    const at::Tensor index = at::full({1}, i, at::kLong);
    const at::Tensor example_loss = example_means(loss(index), 1, group).sum();
    const auto grads = torch::autograd::grad({example_loss}, out.params, {}, false, false, /*allow_unused=*/true);
    for (std::size_t j = 0; j < grads.size(); ++j) {
      if (grads[j].defined()) out.grads[j][i].copy_(grads[j]);
    }
  }
  return out;
}

BackwardToOutputs backward_to_layer_outputs(const RowLoss& loss, std::int64_t n, std::int64_t group) {
  BackwardToOutputs out;
  std::vector<at::Tensor> outputs;
  at::Tensor total;
  {
    CaptureSession session;
    total = example_means(loss(at::arange(n, at::kLong)), n, group).sum();
    out.calls = session.calls();
  }
  for (const auto& call : out.calls) {
    detail::check_output_unchanged(call);
    outputs.push_back(call.output);
  }
  // Gradients with respect to the layer outputs only: the summed weight gradients are never formed.
  out.output_grads = torch::autograd::grad({total}, outputs, {}, false, false, /*allow_unused=*/true);
  at::NoGradGuard no_grad;
  for (std::size_t c = 0; c < out.calls.size(); ++c) {
    out.calls[c].saved = detail::in_parameter_type(out.calls[c], out.calls[c].saved);
    out.output_grads[c] = detail::in_parameter_type(out.calls[c], out.output_grads[c]);
  }
  return out;
}

PerExampleGradients per_example_gradients(torch::nn::Module& model, const RowLoss& loss, std::int64_t n,
                                          std::int64_t group) {
  if (!has_closed_form(model)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      std::cerr << "privdiff: warning: the model has trainable parameters outside per-example layers "
                   "(privdiff::sdk::engine::Linear, Conv2d, GroupNorm, LayerNorm, Embedding); using the slow "
                   "micro-batch path (one example at a time); see docs/engine.md#how-the-engine-chooses-its-path\n";
    }
    return micro_batch_per_example_gradients(model, loss, n, group);
  }
  PerExampleGradients out;
  out.params = trainable_parameters(model);
  out.num_examples = n;
  if (n == 0 || out.params.empty()) {
    out.grads = zero_grads(out.params, n);
    return out;
  }
  out.grads.resize(out.params.size());

  const BackwardToOutputs backward = backward_to_layer_outputs(loss, n, group);
  at::NoGradGuard no_grad;  // per-example gradients are values, not part of the chunk's graph
  std::map<const void*, std::size_t> index;
  for (std::size_t j = 0; j < out.params.size(); ++j) index[out.params[j].unsafeGetTensorImpl()] = j;
  for (std::size_t c = 0; c < backward.calls.size(); ++c) {
    const CapturedCall& call = backward.calls[c];
    if (!backward.output_grads[c].defined()) continue;  // the output did not reach the loss
    const auto params = call.layer->trainable_parameters();
    auto contributions = call.layer->per_example(call, backward.output_grads[c], group);
    for (std::size_t j = 0; j < params.size(); ++j) {
      at::Tensor& slot = out.grads[index.at(params[j].unsafeGetTensorImpl())];
      // A layer called once (the usual case) hands over its result; shared layers add up.
      if (slot.defined()) slot.add_(contributions[j]);
      else slot = std::move(contributions[j]);
    }
  }
  // Parameters that did not reach the loss have zero gradients.
  for (std::size_t j = 0; j < out.grads.size(); ++j) {
    if (!out.grads[j].defined()) out.grads[j] = zero_grads({out.params[j]}, n)[0];
  }
  return out;
}

}  // namespace privdiff::sdk::engine
