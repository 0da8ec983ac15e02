#pragma once
// The convolution every diffusion network here builds (internal to the SDK): a per-example Conv2d
// with a square kernel, padded by kernel / 2 unless told otherwise (the size kept at stride 1).

#include <privdiff/engine/per_example_layers.hpp>

#include <cstdint>
#include <memory>

namespace privdiff::sdk::diffusion {

inline std::shared_ptr<engine::Conv2d> padded_conv(std::int64_t in, std::int64_t out, std::int64_t kernel,
                                                   std::int64_t stride = 1, std::int64_t padding = -1) {
  const std::int64_t pad = padding < 0 ? kernel / 2 : padding;
  return std::make_shared<engine::Conv2d>(engine::Conv2dOptions{in, out, {kernel, kernel}, {stride, stride}, {pad, pad}});
}

}  // namespace privdiff::sdk::diffusion
