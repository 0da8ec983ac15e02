#pragma once
// SipHash-2-4 (Aumasson & Bernstein 2012): a keyed 64-bit pseudorandom function. Without the key
// its outputs cannot be recomputed, so hashes of private records can be written to a run
// directory that may be published without offering a membership test.

#include <array>
#include <cstddef>
#include <cstdint>

namespace privdiff::core {

using SipKey = std::array<std::uint8_t, 16>;

/// SipHash-2-4 of `size` bytes under `key` (the reference implementation's test vectors hold).
std::uint64_t siphash24(const SipKey& key, const void* data, std::size_t size);

}  // namespace privdiff::core
