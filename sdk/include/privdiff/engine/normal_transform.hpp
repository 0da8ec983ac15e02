#pragma once
/// @file
/// From ChaCha20 keystream words to DP-SGD's Gaussian noise values, bit for bit the same on every
/// device. Each 64-bit little-endian word gives a 53-bit uniform u = (w + 0.5) / 2^53 in (0, 1]
/// (the + 0.5 rounds to 1 for the top word); four uniforms give two Box-Muller pairs
/// (r cos 2πu₂, r sin 2πu₂) with r = √(−2 log u₁), and one noise value is the sum of those four
/// normals halved (N(0, 1); see gaussian_noise.hpp for why four). A 64-byte block holds two values.
///
/// log, sin and cos are privdiff's own (portable_log, portable_sincos_2pi): built only from
/// operations IEEE 754 rounds exactly the same everywhere (+ − × ÷ √, exact exponent and
/// power-of-two handling, floor), never from a math library, whose last bits differ between glibc,
/// CUDA and vector libraries. One template is instantiated for doubles (the CPU loops) and for
/// tensors (any device), so the CPU and a GPU give equal noise by construction. Its .cpp is
/// compiled with -ffp-contract=off: a fused multiply-add would round differently.
/// privdiff 0.10 used glibc's log/sin/cos on the CPU: reproducible (seeded) noise now has other
/// values than 0.10 gave for the same seed; the keystream and its use are unchanged.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace privdiff::sdk::engine {

/// The natural logarithm of a positive normal double (within 1 ulp; tests check it against
/// long double).
PRIVDIFF_SDK_API double portable_log(double x);

/// sin(2πu) and cos(2πu) for u in [0, 1] (within 1.5 ulp). The argument is reduced exactly
/// (r = u − k/4), so values near the multiples of 1/4 keep their relative accuracy.
PRIVDIFF_SDK_API void portable_sincos_2pi(double u, double& sine, double& cosine);

/// The Box-Muller pair (r cos 2πu₂, r sin 2πu₂), r = √(−2 log u₁), from the portable functions.
PRIVDIFF_SDK_API void box_muller(double u1, double u2, double& first, double& second);

/// The two noise values of each of `blocks` 64-byte blocks (16 words each, in block order, as
/// ChaCha20 produces them), times `std` (the absolute standard deviation): values[2b] and
/// values[2b + 1], each ((z1 + z2 + z3 + z4) * 0.5) * std. Plain loops the compiler vectorises.
PRIVDIFF_SDK_API void noise_values_from_words(const std::uint32_t* words, std::size_t blocks, double std,
                                              double* values);

/// The same from an int64 tensor of shape [blocks, 16] holding 32-bit words, as tensor operations
/// on its device: a float64 tensor of 2 * blocks values, equal to the loops' values. Throws
/// std::invalid_argument for another shape or dtype.
PRIVDIFF_SDK_API at::Tensor noise_values_from_words(const at::Tensor& words, double std);

}  // namespace privdiff::sdk::engine
