#pragma once
// The centre square crop and resize that DPImageBench applies to CelebA before training
// (data/preprocess_dataset.py, make_transform's center_crop: the largest centred square, then
// PIL's resize with Image.LANCZOS), written as a separable filter over 8-bit images.

#include <cstdint>
#include <vector>

namespace privdiff::plugins::celeba {

enum class Resample {
  lanczos,  ///< Lanczos-3 on PIL's sampling grid: agrees with PIL's LANCZOS to within one grey level
  area,     ///< the mean over each output pixel's footprint (exact fractional overlaps)
};

/// The input pixels one output pixel reads, and their weights (which sum to 1).
struct Taps {
  std::int64_t first = 0;
  std::vector<double> weights;
};

/// Taps that resample a line of n_in pixels to n_out pixels.
std::vector<Taps> resample_taps(std::int64_t n_in, std::int64_t n_out, Resample filter);

/// Crops the centred min(h, w) square of an interleaved 8-bit RGB image (h x w x 3, as stb_image
/// decodes it) and resizes it to size x size, written planar ([3, size, size]) into `out`.
void crop_square_and_resize(const std::uint8_t* rgb, std::int64_t h, std::int64_t w, std::int64_t size,
                            Resample filter, std::uint8_t* out);

}  // namespace privdiff::plugins::celeba
