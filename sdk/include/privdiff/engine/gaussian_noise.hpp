#pragma once
/// @file
/// The Gaussian noise of DP-SGD, drawn once per logical step from a RandomStream (ChaCha20).
///
/// Secure noise (the default of private stages) keys the stream from the OS CSPRNG: nothing in a
/// run directory determines it. Seeded noise is reproducible — the same seed gives the same noise
/// whatever the physical batch split — and is meant for debugging and ablations: whoever knows the
/// seed can subtract the noise, so the guarantee then holds only while the seed stays secret.
/// Both modes return (z1 + z2 + z3 + z4) / 2 of four Box-Muller normals computed in double, as
/// Opacus does in secure mode: the sum smooths the floating-point lattice of a single sample,
/// whose artefacts can leak (Mironov 2012; Holohan & Braghin 2021). It is not a formal fix —
/// the guarantee is proven for ideal reals.

#include <privdiff/engine/random_stream.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine {

class PRIVDIFF_SDK_API GaussianNoise {
 public:
  explicit GaussianNoise(RandomStream stream) : stream_(std::move(stream)) {}
  /// Reproducible noise of stage 0 keyed from `seed` (tests and tools; the engine keys per stage).
  static GaussianNoise seeded(std::uint64_t seed);
  /// Noise keyed from the OS CSPRNG.
  static GaussianNoise secure();

  /// N(0, std^2) noise with the shape, dtype and device of `like`.
  at::Tensor sample(const at::Tensor& like, double std);
  bool is_secure() const { return stream_.is_secret(); }
  /// The seeded stream's state, for checkpoints. Secure noise has no state to save (a resumed
  /// secure run draws fresh noise): both throw std::logic_error in secure mode.
  at::Tensor state() const { return stream_.state(); }
  void set_state(const at::Tensor& state) { stream_.set_state(state); }

 private:
  RandomStream stream_;
};

}  // namespace privdiff::sdk::engine
