// ChaCha20 blocks on the CPU, 16 at a time: each state word is an array over 16 blocks (lanes), so
// every step of a quarter round is one loop over the lanes, which the compiler turns into vector
// instructions (4 SSE2 or 1 AVX-512 register per word).
#include <privdiff/engine/chacha_blocks.hpp>

#include "vector_clones.hpp"

#include <algorithm>
#include <cstring>

namespace privdiff::sdk::engine {

namespace {

constexpr std::uint64_t lanes = 16;
using State = std::uint32_t[16][lanes];

inline std::uint32_t rotl(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

// Rows as template arguments: the compiler sees four distinct rows (no aliasing to rule out).
template <int A, int B, int C, int D>
inline void quarter_round(State& x) {
  for (std::uint64_t l = 0; l < lanes; ++l) {
    std::uint32_t a = x[A][l], b = x[B][l], c = x[C][l], d = x[D][l];
    a += b; d = rotl(d ^ a, 16);
    c += d; b = rotl(b ^ c, 12);
    a += b; d = rotl(d ^ a, 8);
    c += d; b = rotl(b ^ c, 7);
    x[A][l] = a; x[B][l] = b; x[C][l] = c; x[D][l] = d;
  }
}

// Blocks first .. first + count - 1 (count <= lanes) into out, block after block. The lanes past
// count are computed and dropped (their counters may wrap; nothing of them is kept).
PRIVDIFF_VECTOR_CLONES void lane_group(const KeystreamBlocks& run, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  alignas(64) State start, x;
  const std::uint32_t fixed[4] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};  // "expand 32-byte k"
  for (std::uint64_t l = 0; l < lanes; ++l) {
    const std::uint64_t counter = first + l;
    for (int i = 0; i < 4; ++i) start[i][l] = fixed[i];
    for (int i = 0; i < 8; ++i) start[4 + i][l] = run.key[static_cast<std::size_t>(i)];
    start[12][l] = static_cast<std::uint32_t>(counter);
    start[13][l] = static_cast<std::uint32_t>(counter >> 32);
    start[14][l] = static_cast<std::uint32_t>(run.stream_id);
    start[15][l] = static_cast<std::uint32_t>(run.stream_id >> 32);
  }
  std::memcpy(x, start, sizeof x);
  for (int round = 0; round < 10; ++round) {  // 20 rounds: 10 column + 10 diagonal
    quarter_round<0, 4, 8, 12>(x);
    quarter_round<1, 5, 9, 13>(x);
    quarter_round<2, 6, 10, 14>(x);
    quarter_round<3, 7, 11, 15>(x);
    quarter_round<0, 5, 10, 15>(x);
    quarter_round<1, 6, 11, 12>(x);
    quarter_round<2, 7, 8, 13>(x);
    quarter_round<3, 4, 9, 14>(x);
  }
  for (int w = 0; w < 16; ++w) {
    for (std::uint64_t l = 0; l < lanes; ++l) x[w][l] += start[w][l];
  }
  for (std::uint64_t l = 0; l < count; ++l) {
    for (int w = 0; w < 16; ++w) out[16 * l + static_cast<std::uint64_t>(w)] = x[w][l];
  }
}

}  // namespace

void keystream_words(const KeystreamBlocks& blocks, std::uint32_t* out) {
  for (std::uint64_t done = 0; done < blocks.count; done += lanes) {
    lane_group(blocks, blocks.first + done, std::min(lanes, blocks.count - done), out + 16 * done);
  }
}

}  // namespace privdiff::sdk::engine
