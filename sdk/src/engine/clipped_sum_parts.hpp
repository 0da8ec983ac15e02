#pragma once
// What the engine's closed-form paths share (internal): per_example_gradients' backward to the layer
// outputs, and the one- and two-backward clipped sums (fast_gradient_clipping.cpp,
// two_backward_clipping.cpp).

#include <privdiff/engine/capture.hpp>

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace privdiff::sdk::engine::detail {

/// Throws std::invalid_argument when the output `call` recorded was modified in place afterwards (its
/// gradients would be those of another tensor).
inline void check_output_unchanged(const CapturedCall& call) {
  if (static_cast<std::int64_t>(call.output._version()) != call.output_version) {
    throw std::invalid_argument("per-example gradients: the output of a per-example layer was modified in place; "
                                "use out-of-place operations (y = y + x, not y += x) on layer outputs");
  }
}

/// `t` (a call's saved tensor or output gradient) in the dtype of the call's parameters: a forward in
/// lower precision (precision.hpp: bf16 autocast) captures bf16 tensors, and the norms, clipping and
/// sums are taken in the parameters' own dtype. Undefined and integer tensors pass unchanged.
inline at::Tensor in_parameter_type(const CapturedCall& call, const at::Tensor& t) {
  const auto type = call.layer->trainable_parameters().front().scalar_type();
  return t.defined() && t.is_floating_point() && t.scalar_type() != type ? t.to(type) : t;
}

/// Bytes of `examples` per-example gradients of `params`.
inline std::int64_t gradient_bytes(const std::vector<at::Tensor>& params, std::int64_t examples) {
  std::int64_t bytes = 0;
  for (const auto& p : params) bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
  return bytes * examples;
}

/// Examples per slice of norms out of `n`: on a CPU 16, which keeps the working set (patches,
/// per-example gradients, Gram matrices) cache-sized; on a GPU the whole chunk, where the norms are
/// bound by the host dispatching their ~1,700 operations once per slice (29 ms a slice on an H200,
/// whatever its width; docs/gpus.md) and the chunk's size already bounds the memory.
inline std::int64_t norm_slice(const c10::Device& device, std::int64_t n) {
  return device.is_cuda() ? std::max<std::int64_t>(n, 1) : 16;
}

}  // namespace privdiff::sdk::engine::detail
