#pragma once
// What the field's pipelines (and a careless or hostile copy) do to an image, for the near-duplicate
// check's tests (data_identity_test.cpp) and its benchmark on real data (bench/near_duplicate_bench.cpp).
// Every function takes and returns uint8 images [N, C, H, W].

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace privdiff::image_changes {

inline at::Tensor as_bytes(const at::Tensor& pixels) { return pixels.round().clamp(0, 255).to(at::kByte); }

/// Every pixel one grey level up (255 one down): the audit's held-out near-copies.
inline at::Tensor one_grey_level(const at::Tensor& x) {
  return at::where(x.eq(255), x - 1, x + 1);
}

/// The content moved by (dx, dy) pixels (right and down), the background (0) filling in.
inline at::Tensor shifted(const at::Tensor& x, std::int64_t dx, std::int64_t dy) {
  const std::int64_t h = x.size(2), w = x.size(3);
  at::Tensor out = at::zeros_like(x);
  out.narrow(2, std::max<std::int64_t>(dy, 0), h - std::abs(dy))
      .narrow(3, std::max<std::int64_t>(dx, 0), w - std::abs(dx))
      .copy_(x.narrow(2, std::max<std::int64_t>(-dy, 0), h - std::abs(dy))
                 .narrow(3, std::max<std::int64_t>(-dx, 0), w - std::abs(dx)));
  return out;
}

/// Rotated clockwise (as shown, rows downwards) by `degrees` about the centre, bilinear, 0 outside.
inline at::Tensor rotated(const at::Tensor& x, double degrees) {
  const double a = degrees * 3.14159265358979323846 / 180, c = std::cos(a), s = std::sin(a);
  const at::Tensor theta = at::tensor({c, s, 0.0, -s, c, 0.0}, at::kFloat).view({1, 2, 3}).expand({x.size(0), 2, 3});
  const at::Tensor grid = at::affine_grid_generator(theta.contiguous(), x.sizes(), false);
  return as_bytes(at::grid_sampler(x.to(at::kFloat), grid, 0, 0, false));
}

/// Bilinearly resized to side x side (another size, or a crop resized back).
inline at::Tensor resized(const at::Tensor& x, std::int64_t side) {
  return as_bytes(at::upsample_bilinear2d(x.to(at::kFloat), {side, side}, false));
}

/// `left`, `top`, `right` and `bottom` pixels cut off, and the rest resized back to the original size.
inline at::Tensor cropped(const at::Tensor& x, std::int64_t left, std::int64_t top, std::int64_t right,
                          std::int64_t bottom) {
  const at::Tensor kept = x.narrow(2, top, x.size(2) - top - bottom).narrow(3, left, x.size(3) - left - right);
  return as_bytes(at::upsample_bilinear2d(kept.to(at::kFloat), {x.size(2), x.size(3)}, false));
}

/// Padded with black to side x side, centred (28 -> 32 as CIFAR-sized pipelines do).
inline at::Tensor padded(const at::Tensor& x, std::int64_t side) {
  const std::int64_t top = (side - x.size(2)) / 2, left = (side - x.size(3)) / 2;
  return at::constant_pad_nd(x, {left, side - x.size(3) - left, top, side - x.size(2) - top}, 0);
}

/// Additive Gaussian noise of standard deviation `sigma` grey levels, rounded and clipped to 0-255.
inline at::Tensor noisy(const at::Tensor& x, double sigma, std::uint64_t seed) {
  at::manual_seed(seed);
  return as_bytes(x.to(at::kFloat) + sigma * at::randn(x.sizes()));
}

}  // namespace privdiff::image_changes
