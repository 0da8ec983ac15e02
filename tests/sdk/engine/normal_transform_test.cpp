// The noise transform's own log, sin and cos (normal_transform.hpp) against long double references,
// on the points the noise uses (the 53-bit uniform grid, near 0, near 1, near the multiples of 1/8
// where the argument reduction switches) and across the whole double range for log.
#include <privdiff/engine/normal_transform.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace privdiff::sdk::engine;

namespace {

constexpr long double two_pi = 6.283185307179586476925286766559005768L;

// |got - want| in units of the last place of want rounded to double
double ulps(double got, long double want) {
  const double w = std::fabs(static_cast<double>(want));
  const double ulp = w == 0 ? std::numeric_limits<double>::denorm_min()
                            : std::nextafter(w, std::numeric_limits<double>::infinity()) - w;
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

// sin 2 pi u, cos 2 pi u in long double: u - k/4 is exact in long double's 64 bits, so the
// reference keeps its accuracy near the zeros of sin and cos.
void reference_sincos_2pi(double u, long double& s, long double& c) {
  const long double k = std::floor(4.0L * u + 0.5L);
  const long double t = two_pi * (static_cast<long double>(u) - k / 4);
  const long double st = std::sin(t), ct = std::cos(t);
  switch (static_cast<int>(k) % 4) {
    case 0: s = st; c = ct; break;
    case 1: s = ct; c = -st; break;
    case 2: s = -st; c = -ct; break;
    default: s = -ct; c = st; break;
  }
}

// Points on the noise's uniform grid (m + 0.5) / 2^53, m < 2^53: random, near 0, near 1, and a few
// grid steps around every multiple of 1/8.
std::vector<double> uniform_points() {
  std::vector<double> u;
  auto grid = [&](std::uint64_t m) { u.push_back((static_cast<double>(m) + 0.5) / 9007199254740992.0); };
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 200000; ++i) grid(rng() >> 11);
  for (std::uint64_t m = 0; m < 2000; ++m) {
    grid(m);
    grid((std::uint64_t{1} << 53) - 1 - m);
  }
  for (std::uint64_t k = 1; k < 8; ++k) {
    for (std::uint64_t j = 0; j < 200; ++j) {
      grid(k << 50 | j);
      grid((k << 50) - 1 - j);
    }
  }
  for (double x : {0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0}) u.push_back(x);
  return u;
}

}  // namespace

TEST(NormalTransform, LogIsWithinOneUlpOfLongDouble) {
  std::vector<double> x = uniform_points();
  std::mt19937_64 rng(7);  // raw bits only: the same points with every standard library
  for (int i = 0; i < 200000; ++i) {
    const double mantissa = 1 + static_cast<double>(rng() >> 12) * 0x1p-52;
    x.push_back(std::ldexp(mantissa, static_cast<int>(rng() % 2045) - 1021));
  }
  for (int j = 1; j < 3000; ++j) {  // near 1 and around the split point sqrt(1/2)
    x.push_back(1 + j * 0x1p-52);
    x.push_back(1 - j * 0x1p-53);
    x.push_back(std::sqrt(0.5) * (1 + (j - 1500) * 0x1p-52));
  }
  x.push_back(std::numeric_limits<double>::min());
  x.push_back(std::numeric_limits<double>::max());
  double worst = 0, worst_at = 0, worst_libm = 0;
  for (double v : x) {
    const double got = portable_log(v), e = ulps(got, std::log(static_cast<long double>(v)));
    if (e > worst) worst = e, worst_at = v;
    worst_libm = std::max(worst_libm, ulps(got, std::log(v)));
  }
  EXPECT_LE(worst, 1.0) << "at x = " << worst_at;
  EXPECT_LE(worst_libm, 2.0);  // and close to glibc's (itself within about 1 ulp)
  EXPECT_EQ(portable_log(1.0), 0.0);
  EXPECT_EQ(portable_log(2.0), std::log(2.0));
  EXPECT_EQ(portable_log(0.5), -std::log(2.0));
}

// Within 1.5 ulp: cos near pi/4 adds the roundings of r^2 and of the polynomial to that of 1 + ...
// (1.27 ulp is the largest error on these points).
TEST(NormalTransform, SinAndCosOfTwoPiUAreWithinOneAndAHalfUlpOfLongDouble) {
  double worst_sin = 0, worst_cos = 0, sin_at = 0, cos_at = 0;
  for (double u : uniform_points()) {
    double s, c;
    long double rs, rc;
    portable_sincos_2pi(u, s, c);
    reference_sincos_2pi(u, rs, rc);
    if (ulps(s, rs) > worst_sin) worst_sin = ulps(s, rs), sin_at = u;
    if (ulps(c, rc) > worst_cos) worst_cos = ulps(c, rc), cos_at = u;
  }
  EXPECT_LE(worst_sin, 1.5) << "at u = " << sin_at;
  EXPECT_LE(worst_cos, 1.5) << "at u = " << cos_at;
  double s, c;
  portable_sincos_2pi(0.25, s, c);
  EXPECT_EQ(s, 1.0);
  EXPECT_EQ(c, 0.0);
  portable_sincos_2pi(1.0, s, c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
  // Against glibc in double, up to the rounding of 2 pi u in double (|2 pi u| 2^-53 < 7e-16)
  for (double u : {0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9}) {
    portable_sincos_2pi(u, s, c);
    EXPECT_NEAR(s, std::sin(2 * M_PI * u), 1e-15);
    EXPECT_NEAR(c, std::cos(2 * M_PI * u), 1e-15);
  }
}

TEST(NormalTransform, BoxMullerPairsAreTheRadiusTimesCosAndSin) {
  for (double u1 : {1e-16, 0.01, 0.3, 0.5, 0.99, 1.0}) {
    for (double u2 : {0.0, 0.1, 0.25, 0.6, 0.999}) {
      double a, b, s, c;
      box_muller(u1, u2, a, b);
      portable_sincos_2pi(u2, s, c);
      const double r = std::sqrt(-2 * portable_log(u1));
      EXPECT_EQ(a, r * c);
      EXPECT_EQ(b, r * s);
      EXPECT_NEAR(a, std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2), 1e-14);
    }
  }
}
