#pragma once
/// @file
/// Many ChaCha20 blocks at once, equal to RandomStream::block for each (tests check it): the
/// keystream behind DP-SGD's noise, computed where and how the noise is made. ChaCha20 is
/// addressed by block number, so any run of blocks can be computed independently of the others.
///  - keystream_words(blocks, out): on the CPU, 16 blocks at a time in structure-of-arrays lanes
///    (loops the compiler vectorises); the caller spreads runs over threads.
///  - keystream_words(blocks, device): on the device (a GPU's noise never leaves it): one CUDA
///    kernel in a CUDA build, else int64 tensor operations, 32-bit words masked after every
///    addition and rotation.

#include <privdiff/engine/random_stream.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace privdiff::sdk::engine {

/// Writes blocks.count * 16 words: word w of block first + b at out[16 b + w] (the little-endian
/// 32-bit words of RandomStream::block).
PRIVDIFF_SDK_API void keystream_words(const KeystreamBlocks& blocks, std::uint32_t* out);

/// The same words as an int64 tensor of shape [blocks.count, 16] on `device`, each in [0, 2^32).
PRIVDIFF_SDK_API at::Tensor keystream_words(const KeystreamBlocks& blocks, const c10::Device& device);

}  // namespace privdiff::sdk::engine
