#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>

namespace privdiff::sdk {

at::Tensor pixels_from_bytes(const at::Tensor& bytes) { return bytes.to(at::kFloat) / 127.5 - 1.0; }

at::Tensor pixels_to_bytes(const at::Tensor& images) {
  return ((images.to(at::kFloat).clamp(-1, 1) + 1) * 127.5).round().to(at::kByte);
}

}  // namespace privdiff::sdk
