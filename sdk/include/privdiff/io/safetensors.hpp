#pragma once
/// @file
/// safetensors (https://huggingface.co/docs/safetensors/): the format the field's pretrained weights
/// and Python tools exchange. An 8-byte little-endian header length N, N bytes of JSON (each tensor's
/// dtype, shape and [begin, end) in the data section, an optional "__metadata__" of strings), then
/// the data. Reading it runs no code (unlike a pickled .pt/.ckpt): a file is only bytes and offsets,
/// every one of which is checked when it is opened.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace privdiff::sdk {

/// One tensor of a safetensors header.
struct PRIVDIFF_SDK_API SafetensorsEntry {
  std::string name;
  std::string dtype;  ///< as written: "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< byte offsets in the data section
  std::int64_t numel() const;
};

/// A header, validated: its entries in data order and its metadata.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;  ///< where the data section starts in the file (8 + N)
};

/// Parses and checks the whole of a safetensors file held in `bytes`: the header length, the JSON
/// (an object, no name twice, known dtypes, non-negative shapes), and that the tensors' offsets
/// match their sizes and tile the data section exactly (no overlap, no gap, nothing after). Throws
/// std::runtime_error "`what`: safetensors: <what is wrong>" for anything else.
PRIVDIFF_SDK_API SafetensorsHeader parse_safetensors(std::string_view bytes, const std::string& what);

/// A safetensors file, memory-mapped (copy on write) and checked when opened.
class PRIVDIFF_SDK_API SafetensorsFile {
 public:
  /// Throws std::runtime_error naming `path` when it cannot be read or is not a valid file.
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  /// The entry `name`, or null (logarithmic in the number of tensors).
  const SafetensorsEntry* find(const std::string& name) const;
  /// The tensor `name` on the CPU, sharing the mapped file's pages where its bytes are aligned (a
  /// write into it stays in this process). Throws std::out_of_range for an unknown name and
  /// std::runtime_error for a dtype LibTorch does not have (F8, unsigned above 8 bits).
  at::Tensor tensor(const std::string& name) const;
  /// Every tensor by name.
  std::map<std::string, at::Tensor> tensors() const;

 private:
  struct Mapping;
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t> index_;  ///< entry by name
};

/// The bytes of a safetensors file holding `tensors` (any device, any layout; written contiguous,
/// little-endian) and `metadata`. Deterministic, in the layout of Python's `safetensors` writer:
/// tensors ordered by dtype (its order: I64, F64, F32, I32, BF16, F16, I16, I8, U8, BOOL) then
/// name, the header padded with spaces to a multiple of 8; metadata by key (Python's order is a
/// hash map's). Throws std::invalid_argument for an empty or repeated name, the
/// name "__metadata__", or a dtype safetensors has no name for.
PRIVDIFF_SDK_API std::string safetensors_bytes(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                               const std::map<std::string, std::string>& metadata = {});

/// Writes safetensors_bytes(tensors, metadata) to `path` atomically (atomic_file.hpp).
PRIVDIFF_SDK_API void write_safetensors(const std::filesystem::path& path,
                                        const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                        const std::map<std::string, std::string>& metadata = {});

}  // namespace privdiff::sdk
