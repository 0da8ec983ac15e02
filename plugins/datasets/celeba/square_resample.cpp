#include "square_resample.hpp"

#include <algorithm>
#include <cmath>

namespace privdiff::plugins::celeba {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLanczosSupport = 3;

double sinc(double x) { return x == 0 ? 1.0 : std::sin(kPi * x) / (kPi * x); }
double lanczos(double x) { return std::abs(x) < kLanczosSupport ? sinc(x) * sinc(x / kLanczosSupport) : 0.0; }

// PIL's grid: output pixel i is centred on input coordinate (i + 0.5) * scale, pixel j on j + 0.5;
// when shrinking the kernel is stretched by the scale, so every input pixel contributes.
Taps lanczos_taps(std::int64_t i, std::int64_t n_in, double scale) {
  const double stretch = std::max(scale, 1.0), support = kLanczosSupport * stretch;
  const double centre = (static_cast<double>(i) + 0.5) * scale;
  const auto first = std::max<std::int64_t>(static_cast<std::int64_t>(centre - support + 0.5), 0);
  const auto end = std::min<std::int64_t>(static_cast<std::int64_t>(centre + support + 0.5), n_in);
  Taps taps{first, {}};
  for (std::int64_t j = first; j < end; ++j) taps.weights.push_back(lanczos((static_cast<double>(j) + 0.5 - centre) / stretch));
  return taps;
}

// Output pixel i covers input interval [i * scale, (i + 1) * scale); each input pixel weighs by
// how much of itself lies inside.
Taps area_taps(std::int64_t i, std::int64_t n_in, double scale) {
  const double lo = static_cast<double>(i) * scale, hi = std::min((static_cast<double>(i) + 1) * scale, static_cast<double>(n_in));
  const auto first = static_cast<std::int64_t>(std::floor(lo));
  Taps taps{first, {}};
  for (std::int64_t j = first; j < n_in && static_cast<double>(j) < hi; ++j) {
    taps.weights.push_back(std::min(hi, static_cast<double>(j + 1)) - std::max(lo, static_cast<double>(j)));
  }
  return taps;
}

// Rounds half up and clips, as PIL's 8-bit resampling does after each pass.
std::uint8_t to_byte(double v) { return static_cast<std::uint8_t>(std::clamp(std::floor(v + 0.5), 0.0, 255.0)); }

}  // namespace

std::vector<Taps> resample_taps(std::int64_t n_in, std::int64_t n_out, Resample filter) {
  const double scale = static_cast<double>(n_in) / static_cast<double>(n_out);
  std::vector<Taps> all;
  for (std::int64_t i = 0; i < n_out; ++i) {
    Taps taps = filter == Resample::lanczos ? lanczos_taps(i, n_in, scale) : area_taps(i, n_in, scale);
    double sum = 0;
    for (double w : taps.weights) sum += w;
    for (double& w : taps.weights) w /= sum;
    all.push_back(std::move(taps));
  }
  return all;
}

void crop_square_and_resize(const std::uint8_t* rgb, std::int64_t h, std::int64_t w, std::int64_t size,
                            Resample filter, std::uint8_t* out) {
  constexpr std::int64_t channels = 3;
  const std::int64_t side = std::min(h, w), top = (h - side) / 2, left = (w - side) / 2;
  const std::vector<Taps> taps = resample_taps(side, size, filter);
  // Horizontal pass first, into 8-bit rows (side x size x 3), then vertical: PIL's order and
  // intermediate precision, which keeps the two within one grey level of each other.
  std::vector<std::uint8_t> rows(static_cast<std::size_t>(side * size * channels));
  for (std::int64_t y = 0; y < side; ++y) {
    const std::uint8_t* line = rgb + ((top + y) * w + left) * channels;
    for (std::int64_t x = 0; x < size; ++x) {
      const Taps& t = taps[static_cast<std::size_t>(x)];
      for (std::int64_t c = 0; c < channels; ++c) {
        double v = 0;
        for (std::size_t k = 0; k < t.weights.size(); ++k) v += t.weights[k] * line[(t.first + static_cast<std::int64_t>(k)) * channels + c];
        rows[static_cast<std::size_t>((y * size + x) * channels + c)] = to_byte(v);
      }
    }
  }
  for (std::int64_t y = 0; y < size; ++y) {
    const Taps& t = taps[static_cast<std::size_t>(y)];
    for (std::int64_t x = 0; x < size; ++x) {
      for (std::int64_t c = 0; c < channels; ++c) {
        double v = 0;
        for (std::size_t k = 0; k < t.weights.size(); ++k) {
          v += t.weights[k] * rows[static_cast<std::size_t>(((t.first + static_cast<std::int64_t>(k)) * size + x) * channels + c)];
        }
        out[(c * size + y) * size + x] = to_byte(v);
      }
    }
  }
}

}  // namespace privdiff::plugins::celeba
