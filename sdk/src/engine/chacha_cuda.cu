// One CUDA thread per ChaCha20 block (RFC 8439's block function with a 64-bit counter in words
// 12-13 and the 64-bit stream id in words 14-15, as RandomStream::block). Host code includes no
// LibTorch header: this file needs only the CUDA runtime. The rounds repeat random_stream.cpp's as
// device code; Cuda.KeystreamOnTheGpuIsTheCpusWordForWord holds the two to the same words.
#include "chacha_cuda.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace privdiff::sdk::engine::detail {

namespace {

struct Key {
  std::uint32_t words[8];
};

__device__ __forceinline__ std::uint32_t rotate_left(std::uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

__device__ __forceinline__ void quarter_round(std::uint32_t* x, int a, int b, int c, int d) {
  x[a] += x[b]; x[d] = rotate_left(x[d] ^ x[a], 16);
  x[c] += x[d]; x[b] = rotate_left(x[b] ^ x[c], 12);
  x[a] += x[b]; x[d] = rotate_left(x[d] ^ x[a], 8);
  x[c] += x[d]; x[b] = rotate_left(x[b] ^ x[c], 7);
}

__global__ void keystream_kernel(Key key, std::uint64_t stream_id, std::uint64_t first, std::uint64_t count,
                                 std::int64_t* out) {
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const std::uint64_t counter = first + i;
  std::uint32_t start[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};  // "expand 32-byte k"
  for (int w = 0; w < 8; ++w) start[4 + w] = key.words[w];
  start[12] = static_cast<std::uint32_t>(counter);
  start[13] = static_cast<std::uint32_t>(counter >> 32);
  start[14] = static_cast<std::uint32_t>(stream_id);
  start[15] = static_cast<std::uint32_t>(stream_id >> 32);
  std::uint32_t x[16];
  for (int w = 0; w < 16; ++w) x[w] = start[w];
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    quarter_round(x, 0, 4, 8, 12);
    quarter_round(x, 1, 5, 9, 13);
    quarter_round(x, 2, 6, 10, 14);
    quarter_round(x, 3, 7, 11, 15);
    quarter_round(x, 0, 5, 10, 15);
    quarter_round(x, 1, 6, 11, 12);
    quarter_round(x, 2, 7, 8, 13);
    quarter_round(x, 3, 4, 9, 14);
  }
  std::int64_t* block = out + 16 * i;
  for (int w = 0; w < 16; ++w) block[w] = static_cast<std::int64_t>(static_cast<std::uint32_t>(x[w] + start[w]));
}

}  // namespace

void cuda_keystream_words(const std::uint32_t* key, std::uint64_t stream_id, std::uint64_t first, std::uint64_t count,
                          std::int64_t* out, void* stream) {
  if (count == 0) return;
  Key words{};
  for (int w = 0; w < 8; ++w) words.words[w] = key[w];
  constexpr unsigned threads = 256;
  const std::uint64_t grid = (count + threads - 1) / threads;
  if (grid > 0x7FFFFFFFu) throw std::runtime_error("cuda_keystream_words: too many blocks for one launch");
  keystream_kernel<<<static_cast<unsigned>(grid), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      words, stream_id, first, count, out);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) {
    throw std::runtime_error(std::string("cuda_keystream_words: the kernel did not launch: ") + cudaGetErrorString(error));
  }
}

}  // namespace privdiff::sdk::engine::detail
