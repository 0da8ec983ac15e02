#pragma once
// Sample grids as PNG images.

#include <ATen/core/Tensor.h>

#include <filesystem>

namespace privdiff::core {

/// Writes images [rows * cols, C, H, W] with values in [-1, 1] (C = 1 or 3) as one PNG of rows x cols
/// tiles, row-major, with a 2-pixel gap. Throws std::runtime_error naming the file on failure.
void write_image_grid(const std::filesystem::path& file, const at::Tensor& images, std::int64_t rows, std::int64_t cols);

}  // namespace privdiff::core
