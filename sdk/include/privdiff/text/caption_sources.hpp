#pragma once
/// @file
/// Where a dataset plugin's captions come from: one caption file per image (MM-CelebA-HQ's
/// celeba-caption/{i}.txt), or a captions table for any image folder in Hugging Face's imagefolder
/// metadata format (metadata.jsonl or metadata.csv: a `file_name` column and a caption column).
/// Every caption read is checked (caption_problem); every refusal names the file, and the line where
/// there is one. Part of libprivdiff_text (no LibTorch).

#include <privdiff/sdk_api.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace privdiff::sdk {

/// Why `caption` cannot be one ("" when it can): not valid UTF-8 (naming the byte), a NUL or another
/// line break inside it, or over Tokenizer::kMaxCaptionBytes.
PRIVDIFF_SDK_API std::string caption_problem(const std::string& caption);

/// The caption of each image of `images` (paths relative to the image folder) from DIR/<the image's
/// relative path with .txt for its extension>: its line `line` (from 1), with surrounding whitespace
/// (and a Windows line end) removed. std::invalid_argument naming the image and the file for a missing
/// file, "FILE: has N lines" for too few, "FILE:LINE: …" for an empty or bad caption.
PRIVDIFF_SDK_API std::vector<std::string> read_caption_files(const std::filesystem::path& dir,
                                                              const std::vector<std::string>& images, std::size_t line);

/// A captions table: image path (relative to the image folder, '/'-separated) -> caption.
struct PRIVDIFF_SDK_API CaptionTable {
  std::filesystem::path file;
  std::unordered_map<std::string, std::string> captions;
  /// The caption of each image of `images` in order; std::invalid_argument naming the first images the
  /// table has no row for (every image needs its caption: none is trained on without one).
  std::vector<std::string> for_images(const std::vector<std::string>& images) const;
};

/// Reads FILE by its extension: .jsonl (one JSON object per line) or .csv (RFC 4180: a header row,
/// quoted fields, line breaks inside quotes; a UTF-8 byte order mark is skipped). Each row gives the
/// image's path in `file_name` and its caption in `column` (Hugging Face's imagefolder names its text
/// column as the user likes; "text" is the common one). Other columns are ignored. std::invalid_argument
/// "FILE:LINE: …" for a malformed row, a missing column, a repeated file_name or a bad caption.
PRIVDIFF_SDK_API CaptionTable read_caption_table(const std::filesystem::path& file, const std::string& column);

}  // namespace privdiff::sdk
