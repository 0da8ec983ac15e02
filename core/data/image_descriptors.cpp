#include "data/image_descriptors.hpp"

#include "data/image_alignment.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace privdiff::core {

namespace {

constexpr double pi = 3.14159265358979323846;
constexpr std::int64_t rings = 12, angles = 32, harmonics = 8;
constexpr double reach = 0.7;           // normalised: the centre of the frame, where crops and shifts take nothing
constexpr double flat_std = 0.005;      // grey in [0, 1]: about one grey level, no shape
constexpr double shape_floor = 0.05;    // grey levels this far from the background are shape

// Rows centred and scaled to norm 1; rows of (nearly) one value become 0.
at::Tensor normalised(const at::Tensor& rows) {
  const at::Tensor centred = rows - rows.mean(1, true);
  const at::Tensor norm = at::linalg_vector_norm(centred, 2, {1}, true);
  return at::where(norm > 1e-6, centred / norm.clamp_min(1e-12), at::zeros({}, rows.options()));
}

}  // namespace

at::Tensor smoothed(const at::Tensor& images, double sigma) {
  const std::int64_t side = images.size(3), radius = std::max<std::int64_t>(1, std::lround(2.5 * sigma));
  std::vector<float> weights(static_cast<std::size_t>(side * side), 0.0f);
  double total = 0;
  for (std::int64_t k = -radius; k <= radius; ++k) total += std::exp(-0.5 * static_cast<double>(k * k) / (sigma * sigma));
  for (std::int64_t i = 0; i < side; ++i) {
    for (std::int64_t k = -radius; k <= radius; ++k) {
      const std::int64_t j = std::clamp<std::int64_t>(i + k, 0, side - 1);
      weights[static_cast<std::size_t>(i * side + j)] +=
          static_cast<float>(std::exp(-0.5 * static_cast<double>(k * k) / (sigma * sigma)) / total);
    }
  }
  const at::Tensor m = at::tensor(weights).view({side, side});
  return at::matmul(at::matmul(m, images), m.t());
}

Shape shape_of(const at::Tensor& smooth) {
  const std::int64_t n = smooth.size(0), side = smooth.size(3);
  const at::Tensor pixels = smooth.reshape({n, -1});
  const at::Tensor border = at::cat({smooth.select(2, 0), smooth.select(2, side - 1), smooth.select(3, 0),
                                     smooth.select(3, side - 1)}, 2).reshape({n, -1});
  const at::Tensor background = std::get<0>(border.median(1, true));
  const at::Tensor weight = at::relu((pixels - background).abs() - shape_floor);
  const at::Tensor mass = weight.sum(1);
  const at::Tensor points = pixel_centres(side);
  const at::Tensor moments = at::mm(weight, at::cat({points, points * points}, 1)) / mass.clamp_min(1e-6).unsqueeze(1);
  const at::Tensor centre = moments.narrow(1, 0, 2);
  const at::Tensor radius = (moments.narrow(1, 2, 2) - centre * centre).sum(1).clamp_min(0).sqrt();
  const at::Tensor shapeless = mass < 1e-3;
  return {at::where(shapeless.unsqueeze(1), at::zeros({}), centre),
          at::where(shapeless, at::full({}, 0.6), radius).clamp_min(2.0 / static_cast<double>(side)),
          pixels.std(1) < flat_std};
}

at::Tensor noise_level(const at::Tensor& images) {
  const std::int64_t side = images.size(3);
  if (side < 3) return at::zeros({images.size(0)});
  const auto part = [&](std::int64_t dy, std::int64_t dx) { return images.narrow(2, dy, side - 2).narrow(3, dx, side - 2); };
  const at::Tensor laplacian = part(1, 1) * 4 - part(0, 1) - part(2, 1) - part(1, 0) - part(1, 2);
  return std::get<0>(laplacian.reshape({images.size(0), -1}).abs().median(1)) / (0.6745 * std::sqrt(20.0));
}

at::Tensor polar_samples(const at::Tensor& smooth, const Shape& shape, Anchor anchor, const at::Tensor& scale) {
  const std::int64_t n = smooth.size(0);
  const at::Tensor radii = (at::arange(rings, at::kFloat) + 0.5) * (reach / rings);
  const at::Tensor turn = at::arange(angles, at::kFloat) * (2 * pi / angles);
  const at::Tensor x = (radii.unsqueeze(1) * at::cos(turn)).reshape({1, -1});
  const at::Tensor y = (radii.unsqueeze(1) * at::sin(turn)).reshape({1, -1});
  const at::Tensor centre = anchor == Anchor::centroid ? shape.centre : at::zeros({n, 2});
  const at::Tensor s = scale.dim() == 0 ? scale.view({1, 1}) : scale.view({-1, 1});
  const at::Tensor grid = at::stack({centre.select(1, 0).unsqueeze(1) + s * x, centre.select(1, 1).unsqueeze(1) + s * y}, 2);
  return at::grid_sampler(smooth, grid.unsqueeze(1), /*bilinear*/ 0, /*border*/ 1, false).reshape({n, rings, angles});
}

at::Tensor polar_descriptors(const at::Tensor& samples) {
  const at::Tensor spectrum = at::abs(at::fft_rfft(samples, c10::nullopt, 2)).narrow(2, 0, harmonics);
  return normalised(spectrum.reshape({samples.size(0), -1}));
}

PolarMatch match_polar(const at::Tensor& first, const at::Tensor& second) {
  const std::int64_t m = first.size(0);
  const at::Tensor a = normalised(first.reshape({m, -1})).view({m, rings, angles});
  const at::Tensor b = normalised(second.reshape({m, -1})).view({m, rings, angles});
  // A mirror image (x -> -x) holds at angle phi what the image holds at pi - phi.
  const at::Tensor reflected = (angles / 2 - at::arange(angles, at::kLong)).remainder(angles);
  const at::Tensor fa = at::conj(at::fft_rfft(a, c10::nullopt, 2));
  const auto circular = [&](const at::Tensor& y) {  // sum_j a[j] y[j + k], for every shift k: [M, angles]
    return at::fft_irfft(fa * at::fft_rfft(y, c10::nullopt, 2), angles, 2).sum(1);
  };
  const at::Tensor both = at::stack({circular(b), circular(b.index_select(2, reflected))}, 1);  // [M, 2, angles]
  const auto [value, where] = both.reshape({m, -1}).max(1);
  const at::Tensor mirrored = where >= angles, k = where.remainder(angles);
  // The peak between samples: a parabola through it and its neighbours.
  const at::Tensor curve = both.gather(1, mirrored.to(at::kLong).view({m, 1, 1}).expand({m, 1, angles})).squeeze(1);
  const at::Tensor before = curve.gather(1, (k - 1).remainder(angles).unsqueeze(1)).squeeze(1);
  const at::Tensor after = curve.gather(1, (k + 1).remainder(angles).unsqueeze(1)).squeeze(1);
  const at::Tensor bend = before - 2 * value + after;
  const at::Tensor offset = at::where(bend < -1e-9, 0.5 * (before - after) / bend.clamp_max(-1e-9), at::zeros({}));
  at::Tensor degrees = (k.to(at::kFloat) + offset) * (360.0 / angles);
  degrees = at::where(degrees > 180, degrees - 360, degrees);
  return {value, degrees, mirrored};
}

}  // namespace privdiff::core
