#pragma once
/// @file
/// The RandAugment operation set (Cubuk et al. 2020; the 14 ops of torchvision's RandAugment) on
/// image tensors: what DP-FETA's warm-up applies to its few central images so the model does not
/// memorise them. Images are float [C, H, W] or [N, C, H, W] in [-1, 1], the SDK's pixel range;
/// ops work on (x + 1) / 2 in [0, 1] as torchvision's do on [0, 1] tensors, and return [-1, 1].
///
/// Magnitudes follow torchvision: a level m of `magnitude_bins` (31) levels, strength f = m / 30:
/// shear 0.3 f, translation 0.45 f of the side (150/331), rotation 30 f degrees, enhancement
/// factors 1 +- 0.9 f, posterize to 8 - round(4 f) bits, solarize above 1 - f. Geometric and
/// enhancement ops get a random sign. Empty pixels after a geometric op are black (fill 0).

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk::data {

enum class AugmentOp {
  identity, autocontrast, equalize, rotate, solarize, color, posterize, contrast, brightness, sharpness,
  shear_x, shear_y, translate_x, translate_y
};

/// All 14 ops, in the order above.
PRIVDIFF_SDK_API const std::vector<AugmentOp>& augment_ops();
PRIVDIFF_SDK_API std::string to_string(AugmentOp op);

/// One op on one image [C, H, W] at level `magnitude` (0 .. 30); `negative` flips the direction of
/// signed ops (rotation, shear, translation, enhancement). Level 0 is the identity for every op
/// with a magnitude; autocontrast and equalize have none.
PRIVDIFF_SDK_API at::Tensor apply_augment_op(const at::Tensor& image, AugmentOp op, double magnitude, bool negative);

struct RandAugmentOptions {
  std::int64_t ops_per_image = 2;  ///< k ops, drawn uniformly with replacement
  std::int64_t min_magnitude = 1;  ///< level drawn uniformly in [min, max] per image (DP-FETA grey: 1..3)
  std::int64_t max_magnitude = 3;
};

/// RandAugment over a batch [N, C, H, W]: each image gets `ops_per_image` random ops at one random
/// level; all randomness (ops, level, signs) from `generator`, so a seed gives the same batch.
PRIVDIFF_SDK_API at::Tensor rand_augment(const at::Tensor& images, const RandAugmentOptions& options,
                                         at::Generator& generator);

}  // namespace privdiff::sdk::data
