#pragma once
/// @file
/// RandomStream: the random bits behind DP-SGD's privacy — Poisson batch membership and Gaussian
/// noise. A ChaCha20 keystream (RFC 8439 block function, 256-bit key, 64-bit stream id, 64-bit
/// block counter): 256 bits of secret state, so neither batches nor noise can be guessed by
/// enumerating seeds (LibTorch's CPU generator keeps only 32 bits of its seed).
///
/// Two ways to key it:
///  - secret(): the key comes from the operating system's CSPRNG (getrandom). The default of every
///    private stage; never saved anywhere, so nothing in a run directory determines the stream.
///  - reproducible(seed, ...): the key is derived from a 64-bit seed. Same seed, same stream — for
///    debugging and ablations only: whoever knows the seed can replay the noise, so a run that
///    uses it carries a caveat on every privacy report.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace privdiff::sdk::engine {

/// What a stream is used for; part of the ChaCha20 nonce, so one key gives independent streams.
enum class StreamPurpose : std::uint64_t { sampling = 1, noise = 2 };

/// A run of whole keystream blocks for a generator that computes them itself (several at once on
/// the CPU, or on a device): blocks first, first + 1, ..., first + count - 1 of (key, stream_id).
/// Holds the key: never write it anywhere.
struct KeystreamBlocks {
  std::array<std::uint32_t, 8> key{};
  std::uint64_t stream_id = 0;
  std::uint64_t first = 0;
  std::uint64_t count = 0;
};

class PRIVDIFF_SDK_API RandomStream {
 public:
  using Key = std::array<std::uint32_t, 8>;

  /// Keyed from the OS CSPRNG. Throws std::runtime_error when getrandom fails.
  static RandomStream secret(StreamPurpose purpose);
  /// Keyed from (seed, stage): every stage of a run gets its own stream even when two stages are
  /// given the same explicit seed.
  static RandomStream reproducible(std::uint64_t seed, std::uint64_t stage, StreamPurpose purpose);
  /// A raw ChaCha20 stream (for tests against published vectors): words 12-13 of the state are
  /// the block counter, words 14-15 the stream id.
  RandomStream(const Key& key, std::uint64_t stream_id, std::uint64_t counter, bool secret);

  /// Fills `out` with the next keystream bytes. Every call starts on a fresh 64-byte block (the
  /// rest of the previous block is discarded), so the position is always a whole block.
  void fill(void* out, std::size_t bytes);
  /// n independent uniform 53-bit integers (the top bits of each 64-bit word).
  std::vector<std::uint64_t> words(std::size_t n);
  /// n independent standard normals in double: Box-Muller on the 53-bit uniforms
  /// (w + 0.5) / 2^53 with privdiff's portable log and sincos (normal_transform.hpp).
  std::vector<double> standard_normals(std::size_t n);
  /// Hands out the next `count` blocks and advances the counter past them, as fill() of
  /// count * 64 bytes would. Throws std::runtime_error (nothing taken) when fewer are left.
  KeystreamBlocks take_blocks(std::uint64_t count);

  /// True when the key came from the OS CSPRNG (and must never be written out).
  bool is_secret() const { return secret_; }
  /// Key, stream id and counter as an int64 tensor, for checkpoints of reproducible runs.
  /// Throws std::logic_error for a secret stream: its state must not reach the disk.
  at::Tensor state() const;
  void set_state(const at::Tensor& state);

  /// The 64 bytes of ChaCha20 block number `counter` (RFC 8439 §2.3, with a 64-bit counter).
  static std::array<std::uint8_t, 64> block(const Key& key, std::uint64_t stream_id, std::uint64_t counter);

 private:
  Key key_{};
  std::uint64_t stream_id_ = 0;
  std::uint64_t counter_ = 0;
  bool secret_ = false;
};

/// Fills `out` from the OS CSPRNG (getrandom, retried on EINTR). Throws std::runtime_error.
PRIVDIFF_SDK_API void os_random_bytes(void* out, std::size_t bytes);

}  // namespace privdiff::sdk::engine
