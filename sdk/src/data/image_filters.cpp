#include <privdiff/data/image_filters.hpp>

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::sdk::data {

namespace {
void check(const at::Tensor& images, const char* name) {
  if (images.dim() != 4) throw std::invalid_argument(std::string(name) + ": expected images [N, C, H, W]");
}
}  // namespace

at::Tensor median_blur3(const at::Tensor& images) {
  check(images, "median_blur3");
  const at::Tensor p = at::replication_pad2d((images + 1) / 2, {1, 1, 1, 1});
  // [N, C, H, W, 3, 3] windows -> the middle of 9 values.
  const at::Tensor windows = p.unfold(2, 3, 1).unfold(3, 3, 1).flatten(4);
  const at::Tensor median = std::get<0>(windows.median(4));
  return median * 2 - 1;
}

at::Tensor sharpen(const at::Tensor& images) {
  check(images, "sharpen");
  const auto channels = images.size(1);
  const at::Tensor kernel =
      at::tensor({0.0, -1.0, 0.0, -1.0, 5.0, -1.0, 0.0, -1.0, 0.0}, images.options()).view({1, 1, 3, 3});
  const at::Tensor p = at::reflection_pad2d((images + 1) / 2, {1, 1, 1, 1});
  const at::Tensor sharp = at::conv2d(p, kernel.expand({channels, 1, 3, 3}).contiguous(), at::Tensor(),
                                      at::IntArrayRef{1, 1}, at::IntArrayRef{0, 0}, at::IntArrayRef{1, 1}, channels);
  return sharp.clamp(0, 1) * 2 - 1;
}

}  // namespace privdiff::sdk::data
