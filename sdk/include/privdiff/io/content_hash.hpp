#pragma once
/// @file
/// Hashes that detect changed content (an edited recipe, a damaged checkpoint, a cache entry's data):
/// 64-bit FNV-1a, fast and stable across builds; not a security measure. And SHA-256 (FIPS 180-4),
/// for digests other tools publish or compute too (Python's hashlib, sha256sum): the Inception
/// weights are identified by theirs.

#include <privdiff/sdk_api.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace privdiff::sdk {

PRIVDIFF_SDK_API std::uint64_t fnv1a64(const char* data, std::size_t size);
/// fnv1a64 of a text, as 16 hex digits.
PRIVDIFF_SDK_API std::string content_hash(const std::string& text);

/// SHA-256, fed in pieces: update(...)* then hex_digest() (64 lowercase hex digits, as hashlib's
/// hexdigest() and sha256sum print it). hex_digest() ends the computation.
class PRIVDIFF_SDK_API Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(const std::string& text) { update(text.data(), text.size()); }
  std::string hex_digest();

 private:
  void compress(const unsigned char* block);
  std::array<std::uint32_t, 8> state_;
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;  ///< bytes fed so far
};

/// SHA-256 of a text, as 64 hex digits.
PRIVDIFF_SDK_API std::string sha256_hex(const std::string& text);

}  // namespace privdiff::sdk
