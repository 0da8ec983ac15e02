#pragma once
// The one mapping between stored pixels (uint8, 0..255) and model pixels (float, -1..1), used by
// datasets, sample grids, sample files and the evaluation, so they cannot drift apart.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

namespace privdiff::sdk {

/// uint8 [..] in 0..255 -> float in [-1, 1].
PRIVDIFF_SDK_API at::Tensor pixels_from_bytes(const at::Tensor& bytes);

/// float in [-1, 1] (values outside are clamped) -> uint8 0..255, rounded to nearest.
PRIVDIFF_SDK_API at::Tensor pixels_to_bytes(const at::Tensor& images);

}  // namespace privdiff::sdk
