#pragma once
/// @file
/// Per-example gradients of a model's trainable parameters, the heart of DP-SGD.
///
/// The loss is given as a function of a set of example indices that returns per-row losses:
/// `group` rows per example, example-major ([n * group]). The loss of example i is the mean of its
/// rows — with group = K this is DPDM's noise multiplicity, and the gradient returned for example i
/// is the gradient of its K-averaged loss, so clipping (and the sensitivity) stays per example.

#include <privdiff/engine/capture.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>

namespace privdiff::sdk::engine {

/// Per-row losses [n * group] for the examples at `example_indices` (int64 [n], into the batch).
using RowLoss = std::function<at::Tensor(const at::Tensor& example_indices)>;

/// The recorded forward calls of one loss evaluation and the gradients of the loss with respect to
/// their outputs (undefined where an output did not reach the loss).
struct BackwardToOutputs {
  std::vector<CapturedCall> calls;
  std::vector<at::Tensor> output_grads;
};

/// Evaluates the mean-over-group loss of `num_examples` examples with capture on, then runs one
/// backward pass to the captured layer outputs only. The building block of every closed-form path
/// (per_example_gradients, clipped_gradient_sum). Throws std::invalid_argument when the loss does not
/// return num_examples * group values or a layer output was modified in place.
PRIVDIFF_SDK_API BackwardToOutputs backward_to_layer_outputs(const RowLoss& loss, std::int64_t num_examples,
                                                             std::int64_t group);

/// The trainable parameters of `model` in model.parameters() order: the order of every
/// PerExampleGradients this engine returns.
PRIVDIFF_SDK_API std::vector<at::Tensor> trainable_parameters(torch::nn::Module& model);

/// True when every trainable parameter of `model` belongs to a per-example layer (closed form).
PRIVDIFF_SDK_API bool has_closed_form(torch::nn::Module& model);

/// Vectorised per-example gradients of `num_examples` examples in one forward and one backward.
/// Models with trainable parameters outside per-example layers fall back to the micro-batch path,
/// with a warning on stderr (once per process). Throws std::invalid_argument when the loss does not
/// return num_examples * group values, or when a layer's output was modified in place.
PRIVDIFF_SDK_API PerExampleGradients per_example_gradients(torch::nn::Module& model, const RowLoss& loss,
                                                           std::int64_t num_examples, std::int64_t group = 1);

/// The slow, general reference: one example at a time through autograd. Works for any module.
PRIVDIFF_SDK_API PerExampleGradients micro_batch_per_example_gradients(torch::nn::Module& model, const RowLoss& loss,
                                                                       std::int64_t num_examples,
                                                                       std::int64_t group = 1);

}  // namespace privdiff::sdk::engine
