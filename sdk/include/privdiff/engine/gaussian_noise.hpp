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
///
/// Where it is computed: the noise of tensors on the CPU by vectorised loops on the CPU threads;
/// the noise of tensors on a GPU on that GPU, by tensor operations — keystream (chacha_blocks.hpp)
/// and transform (normal_transform.hpp) alike. Both give equal values bit for bit: the same
/// ChaCha20 blocks and a transform built from correctly rounded operations only, so a seed gives the
/// same noise on every device. sample_all() draws a whole logical step's noise in one go.

#include <privdiff/engine/random_stream.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace privdiff::sdk::engine {

/// Which generator computes the noise; both give equal values.
enum class NoiseGenerator {
  cpu_lanes,   ///< vectorised loops on the CPU, on at::get_num_threads() threads
  tensor_ops,  ///< tensor operations on the tensors' device (a GPU makes its own noise)
};

class PRIVDIFF_SDK_API GaussianNoise {
 public:
  explicit GaussianNoise(RandomStream stream) : stream_(std::move(stream)) {}
  /// Reproducible noise of stage 0 keyed from `seed` (tests and tools; the engine keys per stage).
  static GaussianNoise seeded(std::uint64_t seed);
  /// Noise keyed from the OS CSPRNG.
  static GaussianNoise secure();

  /// N(0, std^2) noise with the shape, dtype and device of `like` (std: the absolute standard
  /// deviation). Takes ceil(numel / 2) whole blocks of the stream.
  at::Tensor sample(const at::Tensor& like, double std);
  /// Noise for every tensor of `likes` in one go (a logical step's parameters: one keystream and
  /// one transform for all, not one per tensor). Equal to calling sample() on each tensor in
  /// order: each starts on a fresh block, and the stream ends where those calls would leave it.
  /// Computed by generator_for(the tensors' device), the CPU's when they are on several devices.
  std::vector<at::Tensor> sample_all(const std::vector<at::Tensor>& likes, double std);
  /// sample_all by a chosen generator (tests, benchmarks): tensor_ops runs on the first tensor's
  /// device, cpu_lanes on the CPU; each result is then moved to its tensor's device. Same values.
  std::vector<at::Tensor> sample_all(const std::vector<at::Tensor>& likes, double std, NoiseGenerator generator);
  /// cpu_lanes for the CPU, tensor_ops for any other device.
  static NoiseGenerator generator_for(const c10::Device& device);
  bool is_secure() const { return stream_.is_secret(); }
  /// The seeded stream's state, for checkpoints. Secure noise has no state to save (a resumed
  /// secure run draws fresh noise): both throw std::logic_error in secure mode.
  at::Tensor state() const { return stream_.state(); }
  void set_state(const at::Tensor& state) { stream_.set_state(state); }

 private:
  RandomStream stream_;
};

/// The tensor-operation generator: the noise values of a run of keystream blocks, 2 a block
/// (((z1 + z2 + z3 + z4) / 2) * std, as sample() uses them), as a float64 tensor on `device`. Works
/// on at most `max_blocks` blocks at a time: its temporaries take about 1 KB a block, so the default
/// bounds them near 1 GB whatever the model's size, and keeps DPDM's 1.6M parameters one run (a
/// few hundred kernel launches). Throws std::invalid_argument when max_blocks is 0.
PRIVDIFF_SDK_API at::Tensor device_noise_values(const KeystreamBlocks& run, double std, const c10::Device& device,
                                                std::uint64_t max_blocks = std::uint64_t{1} << 20);

}  // namespace privdiff::sdk::engine
