#pragma once
// The lines of a text file the text library reads (a tokenizer's vocabulary or merges, captions),
// plain or gzip-compressed, bounded in size.
// Private to sdk/src/text.

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::text_file {

/// The file's lines without their '\n' (a last '\n' ends the last line, it does not start an empty
/// one). std::invalid_argument "FILE: …" for what is not a regular file, cannot be read, or holds over
/// 64 MiB once decompressed (bert-base-uncased's is 0.2 MiB, CLIP's merges 1.6 MiB).
std::vector<std::string> read_lines(const std::filesystem::path& file, const std::string& kind);

/// `s` without white space (space, tab, CR, LF, FF, VT) at either end.
std::string trimmed(const std::string& s);

/// "FILE:LINE: problem" (LINE from 1) as std::invalid_argument.
std::invalid_argument error_at(const std::filesystem::path& file, std::size_t line, const std::string& problem);

}  // namespace privdiff::sdk::text_file
