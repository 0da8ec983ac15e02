#pragma once
/// @file
/// Hashes that detect changed content (an edited recipe, a damaged checkpoint, a cache entry's data):
/// 64-bit FNV-1a, fast and stable across builds; not a security measure.

#include <privdiff/sdk_api.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace privdiff::sdk {

PRIVDIFF_SDK_API std::uint64_t fnv1a64(const char* data, std::size_t size);
/// fnv1a64 of a text, as 16 hex digits.
PRIVDIFF_SDK_API std::string content_hash(const std::string& text);

}  // namespace privdiff::sdk
