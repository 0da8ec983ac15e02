#pragma once
// A convolution's per-example view (internal to the engine): its input unfolded into patches and
// its output gradient, both laid out per example and per channel group, with the K rows of an
// example as extra positions. What the materialised and ghost norm strategies multiply.

#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine::detail {

/// The input's patches: [B, G, C_in/G * kh * kw, K * L] (L output positions per row).
at::Tensor conv_patches(const Conv2dOptions& options, const at::Tensor& input, std::int64_t group);
/// The output gradient: [B, G, C_out/G, K * L].
at::Tensor conv_output_grad(const Conv2dOptions& options, const at::Tensor& output_grad, std::int64_t group);

}  // namespace privdiff::sdk::engine::detail
