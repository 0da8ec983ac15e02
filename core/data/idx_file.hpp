#pragma once
// IDX files (the MNIST family's format), plain or gzip-compressed: a magic number naming the
// element type and rank, big-endian int32 dimensions, then the elements.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::core {

struct IdxArray {
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;  ///< unsigned-byte elements (the only type the image sets use)
};

/// Reads an unsigned-byte IDX file (".gz" or not, detected by content). Throws std::runtime_error
/// naming the file and what is wrong: missing, not IDX, unsupported element type, truncated.
IdxArray read_idx(const std::filesystem::path& file);

/// Writes an unsigned-byte IDX file, gzip-compressed when `file` ends in ".gz".
void write_idx(const std::filesystem::path& file, const IdxArray& array);

}  // namespace privdiff::core
