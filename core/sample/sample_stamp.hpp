#pragma once
// The run a sample set belongs to, carried in the set's own files: the comment field of their gzip
// header (RFC 1952, FCOMMENT) holds `privdiff-run {"run": DIR, "recipe": HASH}`. A copy of the files
// (cp, scp, tar, a download) keeps it wherever it goes, so `privdiff eval` of a copy scores it under
// its run's rules; decompressing and recompressing the files, or converting them, drops it. The
// stamp names where the run was when the set was written and the content hash of its recipe.toml,
// by which a run moved elsewhere is recognised when --run names it.

#include <filesystem>
#include <optional>
#include <string>

namespace privdiff::core {

struct SampleStamp {
  std::filesystem::path run;  ///< the run directory, absolute, when the set was written
  std::string recipe_hash;    ///< content_hash of its recipe.toml; empty when it had none
};

/// The stamp of the run in `run_dir` (made absolute; its recipe.toml hashed when there is one).
SampleStamp stamp_of_run(const std::filesystem::path& run_dir);

/// content_hash of RUN/recipe.toml; empty when there is none.
std::string run_recipe_hash(const std::filesystem::path& run_dir);

/// Puts `stamp` into the gzip header of `file` (written by write_idx, .gz), replacing any comment
/// there; the compressed data and their CRC are unchanged. Throws std::runtime_error naming the file
/// when it is not a gzip file or cannot be rewritten.
void stamp_gzip_file(const std::filesystem::path& file, const SampleStamp& stamp);

/// The stamp in `file`'s gzip header; nullopt when it has none (not gzip, no comment, another
/// comment) or cannot be read.
std::optional<SampleStamp> read_sample_stamp(const std::filesystem::path& file);

}  // namespace privdiff::core
