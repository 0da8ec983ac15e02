#include "util/image_grid.hpp"

#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>

// stb is header-only here: its PNG writer is compiled into this file, private to it.
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include <stdexcept>
#include <vector>

namespace privdiff::core {

void write_image_grid(const std::filesystem::path& file, const at::Tensor& images, std::int64_t rows, std::int64_t cols) {
  if (images.dim() != 4 || images.size(0) != rows * cols || (images.size(1) != 1 && images.size(1) != 3)) {
    throw std::invalid_argument("image grid: expected [rows * cols, 1 or 3, H, W] images");
  }
  const std::int64_t c = images.size(1), h = images.size(2), w = images.size(3), gap = 2;
  const std::int64_t height = rows * h + (rows - 1) * gap, width = cols * w + (cols - 1) * gap;
  const at::Tensor bytes =
      sdk::pixels_to_bytes(images.detach().to(at::kCPU)).contiguous();
  std::vector<std::uint8_t> canvas(static_cast<std::size_t>(height * width * c), 255);
  const std::uint8_t* src = bytes.data_ptr<std::uint8_t>();
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const std::int64_t top = (i / cols) * (h + gap), left = (i % cols) * (w + gap);
    for (std::int64_t ch = 0; ch < c; ++ch) {
      for (std::int64_t y = 0; y < h; ++y) {
        for (std::int64_t x = 0; x < w; ++x) {
          canvas[static_cast<std::size_t>(((top + y) * width + left + x) * c + ch)] = src[((i * c + ch) * h + y) * w + x];
        }
      }
    }
  }
  if (!stbi_write_png(file.c_str(), static_cast<int>(width), static_cast<int>(height), static_cast<int>(c), canvas.data(),
                      static_cast<int>(width * c))) {
    throw std::runtime_error("cannot write " + file.string());
  }
}

}  // namespace privdiff::core
