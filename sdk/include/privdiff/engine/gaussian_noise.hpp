#pragma once
/// @file
/// The Gaussian noise of DP-SGD, drawn once per logical step.
///
/// Seeded noise (the default) is reproducible: the same seed gives the same noise whatever the
/// physical batch split, which research comparisons need. Secure noise draws from the operating
/// system's CSPRNG (getrandom) and refuses a seed. Caveat: floating-point Gaussian samples are not
/// exactly Gaussian, and Mironov (2012) showed such rounding artefacts can leak information; as
/// Opacus does, secure mode returns (z1 + z2 + z3 + z4) / 2, a sum that smooths the lattice
/// artefacts (Holohan & Braghin 2021), but it is not a formal fix — the guarantee is for ideal reals.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace privdiff::sdk::engine {

class PRIVDIFF_SDK_API GaussianNoise {
 public:
  static GaussianNoise seeded(std::uint64_t seed);
  static GaussianNoise secure();

  /// N(0, std^2) noise with the shape, dtype and device of `like`.
  at::Tensor sample(const at::Tensor& like, double std);
  bool is_secure() const { return !generator_.has_value(); }
  /// The seeded generator's state, for checkpoints. Secure noise has no state to save (and a
  /// resumed secure run simply draws fresh noise): both throw std::logic_error in secure mode.
  at::Tensor state() const;
  void set_state(const at::Tensor& state);

 private:
  explicit GaussianNoise(std::optional<at::Generator> generator) : generator_(std::move(generator)) {}
  std::optional<at::Generator> generator_;  ///< CPU generator; none in secure mode
};

}  // namespace privdiff::sdk::engine
