#pragma once
// ChaCha20 keystream blocks in one CUDA kernel (chacha_cuda.cu, compiled only when PRIVDIFF_CUDA is on):
// the words keystream_words(blocks, device) returns, one GPU thread per block. The tensor-operation
// version launches ~600 kernels per call, each passing over every block; this one launches one. The
// arithmetic is 32-bit integer addition, xor and rotation, so the words are the CPU's bit for bit.

#include <cstdint>

namespace privdiff::sdk::engine::detail {

/// Writes count * 16 words of the stream (key: 8 words) into `out` (device memory), word w of block
/// first + b at out[16 b + w], each in [0, 2^32), on the CUDA stream `stream` (a cudaStream_t).
/// Plain arguments: the .cu file includes no privdiff or LibTorch header. Throws std::runtime_error
/// when the launch fails.
void cuda_keystream_words(const std::uint32_t* key, std::uint64_t stream_id, std::uint64_t first, std::uint64_t count,
                          std::int64_t* out, void* stream);

}  // namespace privdiff::sdk::engine::detail
