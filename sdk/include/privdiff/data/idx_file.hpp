#pragma once
// IDX files (the MNIST family's format), plain or gzip-compressed: a magic number naming the
// element type and rank, big-endian int32 dimensions, then the elements.

#include <privdiff/data/image_dataset.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::sdk {

struct IdxArray {
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;  ///< unsigned-byte elements (the only type the image sets use)
};

/// Reads an unsigned-byte IDX file (".gz" or not, detected by content). Throws std::runtime_error
/// naming the file and what is wrong: missing, not IDX, unsupported element type, truncated.
PRIVDIFF_SDK_API IdxArray read_idx(const std::filesystem::path& file);

/// Writes an unsigned-byte IDX file, gzip-compressed when `file` ends in ".gz".
PRIVDIFF_SDK_API void write_idx(const std::filesystem::path& file, const IdxArray& array);

/// One split of an MNIST-style directory: "<dir>/<prefix>{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]"
/// (split "train" or "test"; "test-" is accepted for "t10k-", as EMNIST names its files, e.g.
/// prefix "emnist-letters-": emnist-letters-test-images-idx3-ubyte.gz), as uint8 [N, C, H, W]
/// images (C = 1 for an [N, H, W] file; an [N, C, H, W] file — privdiff's colour samples and
/// releases — keeps its C) and labels; num_classes is the largest label + 1, at least 10. Throws
/// std::runtime_error naming the missing or malformed file.
PRIVDIFF_SDK_API LabelledBytes read_idx_split(const std::filesystem::path& dir, const std::string& split,
                                              const std::string& prefix);
/// read_idx_split with no file name prefix (MNIST, Fashion-MNIST, KMNIST).
PRIVDIFF_SDK_API LabelledBytes read_idx_split(const std::filesystem::path& dir, const std::string& split);

/// Where Debian's dataset packages put the MNIST family: "fashion-mnist" and "mnist"; empty for
/// other names.
PRIVDIFF_SDK_API std::filesystem::path system_idx_directory(const std::string& name);

}  // namespace privdiff::sdk
