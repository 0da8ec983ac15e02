// The fixed filters DP-FETA post-processes central images with, on images whose answer is known
// by hand (OpenCV's medianBlur / filter2D conventions at the border).
#include <privdiff/data/image_filters.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace privdiff::sdk::data;

namespace {
// [1, 1, 5, 5] in [-1, 1] from [0, 1] values.
at::Tensor image(std::vector<double> p01) { return at::tensor(p01, at::kDouble).view({1, 1, 5, 5}) * 2 - 1; }
double at01(const at::Tensor& x, int r, int c) { return (x[0][0][r][c].item<double>() + 1) / 2; }
}  // namespace

TEST(ImageFilters, MedianBlurRemovesAnIsolatedSpeckAndKeepsAnEdge) {
  std::vector<double> p(25, 0.0);
  p[2 * 5 + 2] = 1.0;                                    // a speck in the middle
  for (int r = 0; r < 5; ++r) p[r * 5 + 4] = 0.8;         // a bright right column
  const at::Tensor m = median_blur3(image(p));
  EXPECT_EQ(m.sizes(), image(p).sizes());
  EXPECT_NEAR(at01(m, 2, 2), 0.0, 1e-12);                // speck gone: 8 of 9 neighbours are 0
  // The right column: its window has 3 (own) + 3 (replicated border) values 0.8 of 9: median 0.8.
  EXPECT_NEAR(at01(m, 2, 4), 0.8, 1e-12);
  EXPECT_NEAR(at01(m, 2, 3), 0.0, 1e-12);                // next to it: 4 of 9 bright
}

TEST(ImageFilters, SharpenKeepsFlatImagesAndStrengthensEdges) {
  const at::Tensor flat = at::full({2, 3, 5, 5}, 0.2, at::kDouble);
  EXPECT_TRUE(at::allclose(sharpen(flat), flat, 1e-12, 1e-12));
  std::vector<double> p(25, 0.2);
  p[2 * 5 + 2] = 0.3;  // a brighter centre: 5 * 0.3 - 4 * 0.2 = 0.7
  const at::Tensor s = sharpen(image(p));
  EXPECT_NEAR(at01(s, 2, 2), 0.7, 1e-12);
  EXPECT_NEAR(at01(s, 1, 2), 5 * 0.2 - 3 * 0.2 - 0.3, 1e-12);  // a neighbour darkens: 0.1
  EXPECT_NEAR(at01(s, 0, 0), 0.2, 1e-12);                       // reflected border of a flat corner
  p[2 * 5 + 2] = 0.5;                                           // 5 * 0.5 - 0.8 = 1.7: clamped
  EXPECT_NEAR(at01(sharpen(image(p)), 2, 2), 1.0, 1e-12);
}

TEST(ImageFilters, RefuseAnythingButABatch) {
  EXPECT_THROW(median_blur3(at::zeros({1, 5, 5})), std::invalid_argument);
  EXPECT_THROW(sharpen(at::zeros({5, 5})), std::invalid_argument);
}
