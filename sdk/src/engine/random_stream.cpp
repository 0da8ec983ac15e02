#include <privdiff/engine/random_stream.hpp>

#include <privdiff/engine/normal_transform.hpp>

#include <ATen/ATen.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/random.h>

namespace privdiff::sdk::engine {

void os_random_bytes(void* buffer, std::size_t size) {
  auto* out = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::getrandom(out, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    }
    out += n;
    size -= static_cast<std::size_t>(n);
  }
}

namespace {

inline std::uint32_t rotl(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

inline void quarter_round(std::uint32_t* x, int a, int b, int c, int d) {
  x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
  x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
  x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
  x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
}

constexpr std::size_t block_bytes = 64;

}  // namespace

std::array<std::uint8_t, 64> RandomStream::block(const Key& key, std::uint64_t stream_id, std::uint64_t counter) {
  std::uint32_t state[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};  // "expand 32-byte k"
  for (int i = 0; i < 8; ++i) state[4 + i] = key[static_cast<std::size_t>(i)];
  state[12] = static_cast<std::uint32_t>(counter);
  state[13] = static_cast<std::uint32_t>(counter >> 32);
  state[14] = static_cast<std::uint32_t>(stream_id);
  state[15] = static_cast<std::uint32_t>(stream_id >> 32);
  std::uint32_t x[16];
  std::memcpy(x, state, sizeof x);
  for (int round = 0; round < 10; ++round) {  // 20 rounds: 10 column + 10 diagonal
    quarter_round(x, 0, 4, 8, 12);
    quarter_round(x, 1, 5, 9, 13);
    quarter_round(x, 2, 6, 10, 14);
    quarter_round(x, 3, 7, 11, 15);
    quarter_round(x, 0, 5, 10, 15);
    quarter_round(x, 1, 6, 11, 12);
    quarter_round(x, 2, 7, 8, 13);
    quarter_round(x, 3, 4, 9, 14);
  }
  std::array<std::uint8_t, 64> out{};
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t v = x[i] + state[i];
    for (int b = 0; b < 4; ++b) out[static_cast<std::size_t>(4 * i + b)] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return out;
}

RandomStream::RandomStream(const Key& key, std::uint64_t stream_id, std::uint64_t counter, bool secret)
    : key_(key), stream_id_(stream_id), counter_(counter), secret_(secret) {}

RandomStream RandomStream::secret(StreamPurpose purpose) {
  Key key;
  os_random_bytes(key.data(), sizeof key);
  return RandomStream(key, static_cast<std::uint64_t>(purpose), 0, true);
}

RandomStream RandomStream::reproducible(std::uint64_t seed, std::uint64_t stage, StreamPurpose purpose) {
  // An injective layout of (seed, stage) into the key: distinct pairs give unrelated streams.
  Key key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
          static_cast<std::uint32_t>(stage), static_cast<std::uint32_t>(stage >> 32),
          0x76697270, 0x66666964, 0x64656573, 0};  // "privdiffseed" tag
  return RandomStream(key, static_cast<std::uint64_t>(purpose), 0, false);
}

void RandomStream::fill(void* buffer, std::size_t bytes) {
  auto* out = static_cast<std::uint8_t*>(buffer);
  while (bytes > 0) {
    if (counter_ == UINT64_MAX) throw std::runtime_error("random stream exhausted (2^64 blocks)");
    const auto b = block(key_, stream_id_, counter_++);
    const std::size_t n = std::min(bytes, block_bytes);
    std::memcpy(out, b.data(), n);
    out += n;
    bytes -= n;
  }
}

std::vector<std::uint64_t> RandomStream::words(std::size_t n) {
  std::vector<std::uint64_t> w(n);
  fill(w.data(), n * sizeof(std::uint64_t));
  for (auto& v : w) v >>= 11;
  return w;
}

std::vector<double> RandomStream::standard_normals(std::size_t n) {
  const std::vector<std::uint64_t> bits = words(n + (n & 1));
  std::vector<double> out(bits.size());
  constexpr double two_53 = 9007199254740992.0;
  for (std::size_t i = 0; i < bits.size(); i += 2) {
    const double u1 = (static_cast<double>(bits[i]) + 0.5) / two_53;  // in (0, 1]: log(u1) is finite
    const double u2 = (static_cast<double>(bits[i + 1]) + 0.5) / two_53;
    box_muller(u1, u2, out[i], out[i + 1]);
  }
  out.resize(n);
  return out;
}

KeystreamBlocks RandomStream::take_blocks(std::uint64_t count) {
  // fill() never uses block 2^64 - 1: the same blocks are left here
  if (count > UINT64_MAX - counter_) throw std::runtime_error("random stream exhausted (2^64 blocks)");
  KeystreamBlocks run{key_, stream_id_, counter_, count};
  counter_ += count;
  return run;
}

at::Tensor RandomStream::state() const {
  if (secret_) throw std::logic_error("a secret random stream has no state to save");
  at::Tensor s = at::empty({11}, at::kLong);
  auto* p = s.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < 8; ++i) p[i] = key_[i];
  p[8] = static_cast<std::int64_t>(stream_id_);
  p[9] = static_cast<std::int64_t>(counter_);
  p[10] = 0x50445253;  // format tag
  return s;
}

void RandomStream::set_state(const at::Tensor& state) {
  if (secret_) throw std::logic_error("a secret random stream has no state to restore");
  if (state.scalar_type() != at::kLong || state.numel() != 11 || state[10].item<std::int64_t>() != 0x50445253) {
    throw std::invalid_argument("not a RandomStream state");
  }
  const at::Tensor s = state.to(at::kCPU).contiguous();  // a checkpoint may be mapped to a GPU
  const auto* p = s.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < 8; ++i) key_[i] = static_cast<std::uint32_t>(p[i]);
  stream_id_ = static_cast<std::uint64_t>(p[8]);
  counter_ = static_cast<std::uint64_t>(p[9]);
}

}  // namespace privdiff::sdk::engine
