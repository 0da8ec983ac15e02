// ChaCha20 blocks as int64 tensor operations, on whatever device the tensors live: a GPU computes
// its own noise instead of receiving it from the CPU. A CUDA build does it in one kernel
// (chacha_cuda.cu); these operations are then the other devices' way, and the reference the
// kernel is tested against. Each 32-bit word sits in an int64 (no unsigned 32-bit tensors in LibTorch): additions
// and rotations are masked back to 32 bits. The four rows of the state are [blocks, 4] tensors, so
// one operation does a step of four quarter rounds: the column round on columns as they are, the
// diagonal round after rolling rows b, c, d by 1, 2, 3.
#include <privdiff/engine/chacha_blocks.hpp>

#include <ATen/ATen.h>

#ifdef PRIVDIFF_CUDA_KERNELS
#include "chacha_cuda.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <vector>

namespace privdiff::sdk::engine {

namespace {

constexpr std::int64_t mask = 0xFFFFFFFF;

// x += y; z = rotl(z ^ x, bits), in place but for one temporary (fewer allocations: on the CPU a
// fresh large tensor is fresh pages to fault in)
void step(at::Tensor& x, const at::Tensor& y, at::Tensor& z, int bits) {
  x.add_(y).bitwise_and_(mask);
  z.bitwise_xor_(x);
  const at::Tensor high = at::bitwise_left_shift(z, bits);
  z.bitwise_right_shift_(32 - bits).bitwise_or_(high).bitwise_and_(mask);
}

void quarter_rounds(at::Tensor& a, at::Tensor& b, at::Tensor& c, at::Tensor& d) {
  step(a, b, d, 16);
  step(c, d, b, 12);
  step(a, b, d, 8);
  step(c, d, b, 7);
}

// The initial state of every block: [count, 16] int64 on `device`.
at::Tensor start_state(const KeystreamBlocks& run, const c10::Device& device) {
  const auto count = static_cast<std::int64_t>(run.count);
  std::vector<std::int64_t> row{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};  // "expand 32-byte k"
  for (const std::uint32_t k : run.key) row.push_back(k);
  row.insert(row.end(), {0, 0, static_cast<std::int64_t>(run.stream_id & mask), static_cast<std::int64_t>(run.stream_id >> 32)});
  at::Tensor start = at::tensor(row, at::kLong).to(device).repeat({count, 1});
  // Counter first + i as two 32-bit words, with the carry: (first mod 2^32) + i cannot overflow.
  const at::Tensor low = at::arange(count, at::TensorOptions(device).dtype(at::kLong)) + static_cast<std::int64_t>(run.first & mask);
  start.select(1, 12).copy_(at::bitwise_and(low, mask));
  start.select(1, 13).copy_(at::bitwise_and(at::bitwise_right_shift(low, 32) + static_cast<std::int64_t>(run.first >> 32), mask));
  return start;
}

}  // namespace

at::Tensor keystream_words(const KeystreamBlocks& blocks, const c10::Device& device) {
  if (blocks.count == 0) return at::empty({0, 16}, at::TensorOptions(device).dtype(at::kLong));
#ifdef PRIVDIFF_CUDA_KERNELS
  if (device.is_cuda()) {  // one kernel instead of ~600 passes over the blocks (chacha_cuda.cu)
    const c10::cuda::CUDAGuard on_device(device);
    at::Tensor words = at::empty({static_cast<std::int64_t>(blocks.count), 16}, at::TensorOptions(device).dtype(at::kLong));
    detail::cuda_keystream_words(blocks.key.data(), blocks.stream_id, blocks.first, blocks.count,
                                 words.data_ptr<std::int64_t>(), c10::cuda::getCurrentCUDAStream(device.index()).stream());
    return words;
  }
#endif
  const at::Tensor start = start_state(blocks, device);
  at::Tensor a = start.slice(1, 0, 4).clone(), b = start.slice(1, 4, 8).clone();
  at::Tensor c = start.slice(1, 8, 12).clone(), d = start.slice(1, 12, 16).clone();
  for (int round = 0; round < 10; ++round) {
    quarter_rounds(a, b, c, d);  // columns (0 4 8 12) ... (3 7 11 15)
    b = b.roll(-1, 1);  // diagonals (0 5 10 15) (1 6 11 12) (2 7 8 13) (3 4 9 14)
    c = c.roll(-2, 1);
    d = d.roll(-3, 1);
    quarter_rounds(a, b, c, d);
    b = b.roll(1, 1);
    c = c.roll(2, 1);
    d = d.roll(3, 1);
  }
  return at::cat({a, b, c, d}, 1).add_(start).bitwise_and_(mask);
}

}  // namespace privdiff::sdk::engine
