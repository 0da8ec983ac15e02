#pragma once
/// @file
/// Small fixed image filters on [N, C, H, W] float tensors in [-1, 1] (the SDK's pixel range),
/// applied channel by channel on (x + 1) / 2 and returned in [-1, 1]. DP-FETA post-processes its
/// central images with both (a 3x3 median blur, then sharpening for grey images), as OpenCV's
/// medianBlur and filter2D do: the border is replicated for the median and reflected (101) for the
/// sharpening kernel. Post-processing of a DP release costs no privacy.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

namespace privdiff::sdk::data {

/// Each pixel becomes the median of its 3 x 3 neighbourhood (border pixels replicated).
PRIVDIFF_SDK_API at::Tensor median_blur3(const at::Tensor& images);

/// The Laplacian sharpening kernel [[0, -1, 0], [-1, 5, -1], [0, -1, 0]], clamped to the range.
PRIVDIFF_SDK_API at::Tensor sharpen(const at::Tensor& images);

}  // namespace privdiff::sdk::data
