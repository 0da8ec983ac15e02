// Compiled with -ffp-contract=off -fno-math-errno (sdk/CMakeLists.txt): no a * b + c may become a
// fused multiply-add (tensor operations never fuse, so the two instantiations would differ), and
// std::sqrt stays one IEEE instruction that the loops can vectorise.
#include <privdiff/engine/normal_transform.hpp>

#include "vector_clones.hpp"

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

// The exact operations the transform needs besides + - * / (IEEE-rounded alike everywhere), for
// doubles and for tensors. Tensors are only ever divided by tensors: CUDA divides by a scalar as
// a multiplication by its reciprocal, which rounds differently. No name here is one of ATen's:
// argument-dependent lookup would prefer at::uniform or at::select to a template of ours.

inline double choose(bool c, double a, double b) { return c ? a : b; }
inline bool both(bool a, bool b) { return a && b; }
inline double square_root(double x) { return std::sqrt(x); }
// floor of 0 <= x < 2^31 (a truncating conversion vectorises; std::floor is a library call here)
inline double floor_small(double x) { return static_cast<double>(static_cast<std::int32_t>(x)); }
inline std::int64_t bits_of(double x) {
  std::int64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
inline double double_of(std::int64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
inline std::int64_t shift_right(std::int64_t b, int n) { return b >> n; }  // b >= 0 here
inline std::int64_t shift_left(std::int64_t b, int n) { return b << n; }

inline at::Tensor choose(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) { return at::where(c, a, b); }
inline at::Tensor both(const at::Tensor& a, const at::Tensor& b) { return at::logical_and(a, b); }
inline at::Tensor square_root(const at::Tensor& x) { return at::sqrt(x); }
inline at::Tensor floor_small(const at::Tensor& x) { return at::floor(x); }
inline at::Tensor bits_of(const at::Tensor& x) { return x.contiguous().view(at::kLong); }
inline at::Tensor double_of(const at::Tensor& b) { return b.view(at::kDouble); }
inline at::Tensor shift_right(const at::Tensor& b, int n) { return at::bitwise_right_shift(b, n); }
inline at::Tensor shift_left(const at::Tensor& b, int n) { return at::bitwise_left_shift(b, n); }

constexpr std::int64_t one_bits = 0x3FF0000000000000;  // 1.0, or 1023 in the exponent field
constexpr std::int64_t c_bits = 0x3FE6A09E667F3BCD;    // sqrt(1/2), rounded
constexpr std::int64_t two_52_bits = 0x4330000000000000;  // 2^52: its low bits add an integer < 2^52
constexpr double two_52_plus_bias = 4503599627371519.0;  // 2^52 + 1023
// ln 2 = ln2_hi + ln2_lo, ln2_hi with 42 significant bits: e * ln2_hi is exact for |e| < 2^11.
constexpr double ln2_hi = 0x1.62e42fefa38p-1;
constexpr double ln2_lo = 0x1.ef35793c7673p-45;
// log(1 + f) = 2 atanh(s), s = f / (2 + f): 2s + s R(s^2) with R(z) = z (2/3 + 2z/5 + ... + 2z^9/21);
// |s| < 0.172, so the first term left out is below 2^-60 relative.
constexpr std::array<double, 10> atanh_series{2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11,
                                              2.0 / 13, 2.0 / 15, 2.0 / 17, 2.0 / 19, 2.0 / 21};
// sin(2 pi r) = r (2 pi + r^2 P(r^2)) and cos(2 pi r) = 1 + r^2 Q(r^2): Taylor coefficients
// (-1)^k (2 pi)^n / n! (computed to 300 bits, rounded) for |2 pi r| <= pi/4, where the first term
// left out is below 2^-58 relative. 2 pi = two_pi_hi + two_pi_lo.
constexpr double two_pi_hi = 0x1.921fb54442d18p+2;
constexpr double two_pi_lo = 0x1.1a62633145c07p-52;
constexpr double two_pi_hi_hi = 0x1.921fb58p+2;   // two_pi_hi = two_pi_hi_hi + two_pi_hi_lo,
constexpr double two_pi_hi_lo = -0x1.dde974p-25;  // 26 and 23 significant bits
constexpr std::array<double, 8> sin_series{-0x1.4abbce625be53p+5, 0x1.466bc6775aae2p+6, -0x1.32d2cce62bd86p+6,
                                           0x1.50783487ee782p+5,  -0x1.e3074fde8871fp+3, 0x1.e8f434d018d63p+1,
                                           -0x1.6fadb9f155744p-1, 0x1.aaec32af93359p-4};
constexpr std::array<double, 8> cos_series{-0x1.3bd3cc9be45dep+4, 0x1.03c1f081b5ac4p+6, -0x1.55d3c7e3cbffap+6,
                                           0x1.e1f506891babbp+5,  -0x1.a6d1f2a204a8cp+4, 0x1.f9d38a3763cc3p+2,
                                           -0x1.b6e24f44b128fp+0, 0x1.20c62c2f2d7f5p-2};

// c[I] + z (c[I+1] + z (c[I+2] + ...)), Horner's rule, unrolled at compile time (a loop left in
// would keep the vectoriser off the caller's loop)
template <std::size_t I = 0, class T, std::size_t N>
inline T polynomial(const T& z, const std::array<double, N>& c) {
  if constexpr (I + 2 == N) {
    return z * c[I + 1] + c[I];
  } else {
    return polynomial<I + 1>(z, c) * z + c[I];
  }
}

// log x for a positive normal x: x = 2^e m exactly with m in [c, 2c), c = sqrt(1/2) rounded, then
// log x = e ln 2 + log(1 + f), f = m - 1 (exact), log(1 + f) = f - s (f - R).
// e and m come from integer arithmetic on the bits (no branch, no select): positive doubles are
// ordered as their bits, so (bits(x) - bits(c)) / 2^52, floored, is e (kept >= 0 by adding 1023
// 2^52), and m's bits are x's with e taken off the exponent field.
template <class T>
inline T log_positive(const T& x) {
  const auto bits = bits_of(x);
  const auto biased = shift_right(bits - c_bits + one_bits, 52);  // e + 1023, in [0, 2047)
  const T m = double_of(bits - shift_left(biased, 52) + one_bits);
  const T e = double_of(biased | two_52_bits) - two_52_plus_bias;
  const T f = m - 1.0;
  const T s = f / (f + 2.0);
  const T z = s * s;
  const T r = z * polynomial(z, atanh_series);
  // e ln2_hi + f, the large part, with its rounding error kept (e ln2_hi is exact, and Knuth's
  // two-sum gives the sum's error exactly): only the last addition rounds at the result's scale.
  const T head = e * ln2_hi;
  const T sum = head + f;
  const T f_part = sum - head;
  const T error = (head - (sum - f_part)) + (f - f_part);
  return sum + (error + (e * ln2_lo - s * (f - r)));
}

// p + p_error = r * two_pi_hi exactly (Dekker's product, no fused multiply-add): r is split into
// two halves of 26 bits (Veltkamp), two_pi_hi into 26 + 27 bits, so every partial product is exact.
template <class T>
inline void times_two_pi(const T& r, T& p, T& p_error) {
  const T t = r * 134217729.0;  // 2^27 + 1
  const T r_hi = t - (t - r);
  const T r_lo = r - r_hi;
  p = r * two_pi_hi;
  p_error = (((r_hi * two_pi_hi_hi - p) + r_hi * two_pi_hi_lo) + r_lo * two_pi_hi_hi) + r_lo * two_pi_hi_lo;
}

// sin 2 pi u and cos 2 pi u for u in [0, 1]: k = round(4u) (halves up), r = u - k/4 in [-1/8, 1/8]
// exactly (Sterbenz: u and k/4 are within a factor 2), then the quadrant k mod 4 swaps and signs.
template <class T>
inline void sincos_2pi(const T& u, T& sine, T& cosine) {
  const T k = floor_small((floor_small(u * 8.0) + 1.0) * 0.5);
  const T r = u - k * 0.25;
  const T z = r * r;
  T p, p_error;
  times_two_pi(r, p, p_error);
  const T s = p + (p_error + r * (z * polynomial(z, sin_series) + two_pi_lo));
  const T c = z * polynomial(z, cos_series) + 1.0;
  const T q = k - floor_small(k * 0.25) * 4.0;  // 0..3
  const auto odd = both(q > 0.5, q < 1.5) | both(q > 2.5, q < 3.5);
  const T sine_abs = choose(odd, c, s), cosine_abs = choose(odd, s, c);
  sine = choose(q > 1.5, -sine_abs, sine_abs);
  cosine = choose(both(q > 0.5, q < 2.5), -cosine_abs, cosine_abs);
}

// sqrt(-2 log u): the Box-Muller radius
template <class T>
inline T radius(const T& u) {
  return square_root(log_positive(u) * -2.0);
}

// One noise value from two Box-Muller pairs (r1, angle 1) and (r2, angle 2), in this order, times std.
template <class T>
inline T four_normals(const T& r1, const T& c1, const T& s1, const T& r2, const T& c2, const T& s2, double std) {
  return ((((r1 * c1 + r1 * s1) + r2 * c2) + r2 * s2) * 0.5) * std;
}

// (w + 0.5) / 2^53 for a 53-bit integer w held exactly in a double
template <class T>
inline T word_uniform(const T& w) {
  return (w + 0.5) * 0x1p-53;
}

// w < 2^52 as a double, exactly (an integer OR and a subtraction, which vectorise)
inline double exact_double(std::uint64_t w) {
  return double_of(static_cast<std::int64_t>(w) | two_52_bits) - 0x1p52;
}

constexpr std::size_t tile = 128;  // values per pass of the loops (working arrays stay in L1)

// Values [0, count) of one tile, count <= tile; `words` holds 8 words (4 uniforms) per value.
PRIVDIFF_VECTOR_CLONES void tile_values(const std::uint32_t* words, std::size_t count, double std, double* out) {
  alignas(64) double u[4][tile], r[2][tile], s[2][tile], c[2][tile];
  for (std::size_t j = 0; j < 4; ++j) {
    for (std::size_t v = 0; v < count; ++v) {
      const std::uint32_t lo = words[8 * v + 2 * j], hi = words[8 * v + 2 * j + 1];
      u[j][v] = word_uniform(exact_double(hi) * 0x1p21 + exact_double(lo >> 11));
    }
  }
  for (std::size_t p = 0; p < 2; ++p) {
    for (std::size_t v = 0; v < count; ++v) r[p][v] = radius(u[2 * p][v]);
    for (std::size_t v = 0; v < count; ++v) sincos_2pi(u[2 * p + 1][v], s[p][v], c[p][v]);
  }
  for (std::size_t v = 0; v < count; ++v) {
    out[v] = four_normals(r[0][v], c[0][v], s[0][v], r[1][v], c[1][v], s[1][v], std);
  }
}

}  // namespace

double portable_log(double x) { return log_positive(x); }

void portable_sincos_2pi(double u, double& sine, double& cosine) { sincos_2pi(u, sine, cosine); }

void box_muller(double u1, double u2, double& first, double& second) {
  double s, c;
  sincos_2pi(u2, s, c);
  const double r = radius(u1);
  first = r * c;
  second = r * s;
}

void noise_values_from_words(const std::uint32_t* words, std::size_t blocks, double std, double* values) {
  const std::size_t n = 2 * blocks;
  for (std::size_t v = 0; v < n; v += tile) tile_values(words + 8 * v, std::min(tile, n - v), std, values + v);
}

at::Tensor noise_values_from_words(const at::Tensor& words, double std) {
  if (words.dim() != 2 || words.size(1) != 16 || words.scalar_type() != at::kLong) {
    throw std::invalid_argument("noise_values_from_words: expected an int64 tensor of shape [blocks, 16]");
  }
  // 53-bit word j of a block: (word 2j+1 << 21) | (word 2j >> 11), below 2^53: no int64 overflow.
  const at::Tensor lo = words.slice(1, 0, 16, 2), hi = words.slice(1, 1, 16, 2);
  const at::Tensor w = at::bitwise_or(at::bitwise_left_shift(hi, 21), at::bitwise_right_shift(lo, 11));
  const at::Tensor u = word_uniform(w.to(at::kDouble)).reshape({-1, 4});  // a value's four uniforms per row
  const at::Tensor r = radius(u.slice(1, 0, 4, 2));  // both pairs at once: columns u1, u3
  at::Tensor s, c;
  sincos_2pi(u.slice(1, 1, 4, 2), s, c);  // columns u2, u4
  auto col = [](const at::Tensor& t, std::int64_t j) { return t.select(1, j); };
  return four_normals(col(r, 0), col(c, 0), col(s, 0), col(r, 1), col(c, 1), col(s, 1), std);
}

}  // namespace privdiff::sdk::engine
