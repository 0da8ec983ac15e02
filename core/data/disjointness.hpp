#pragma once
// The data-identity service (ARCHITECTURE.md section 11): the one answer to "does this data share anyone
// with the private data?", wherever privdiff needs it —
//   - a run's [[eval]] reference = "held_out": its test split (run/preflight.cpp; a sweep scores its
//     candidates through their [[eval]], so this covers sweeps),
//   - `privdiff eval` of a run's samples: every real split it reads (run/evaluation_data_use.hpp),
//   - [run] init_from_disjoint: this run's private data against the source's data (run/preflight.cpp).
//
// Hashes first (record_set.hpp: keyed for a run's recorded private sets, plain for data opened here):
// any copy, subset, reordering or lossless re-encoding of a record. Then, where the private images can
// be opened, near-duplicates (near_duplicates.hpp): a record changed by a grey level, mirrored, shifted,
// rotated, cropped, padded, resized or made noisy. The answer says what it looked for and what it did
// not, for the refusal or the caveat it ends in; where the private images cannot be opened it rests on
// the hashes alone, and says so.

#include "data/near_duplicates.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <privdiff/components/dataset.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

/// Opens the datasets an earlier run's recorded recipe.toml names (cli/command_setup.hpp's
/// earlier_run_data, or a test's stand-in). Throws std::runtime_error when they cannot be opened.
using RunDataOpener = std::function<std::vector<std::unique_ptr<sdk::Dataset>>(const std::filesystem::path& run_dir)>;

/// Data that a candidate must share no one with.
struct ProtectedData {
  std::string description;               ///< for messages, e.g. "tiny-fashion-mnist (train) of run R"
  RecordSet records;                     ///< its records' hashes: keyed (a run's record set) or plain
  const sdk::Dataset* images = nullptr;  ///< its images, for near-duplicates; null: not compared
  std::string unopened;                  ///< why `images` is null
};

/// What a check found, and what it looked for.
struct Disjointness {
  std::string candidate;  ///< the candidate's name
  std::int64_t shared = 0;  ///< its records among those of `shared_with`, by hash
  std::string shared_with;
  std::string incomparable;  ///< why hashes could not be compared (another record key); empty if they could
  std::int64_t near_copies = 0;  ///< its records with a near-duplicate among the private images
  std::optional<NearDuplicate> nearest;  ///< the most similar such pair (first: candidate, second: private)
  std::string nearest_in;  ///< the description of the data `nearest->second` is in
  std::int64_t hashed = 0, compared = 0;  ///< private records compared by hash, and for near-duplicates
  std::vector<std::string> unopened;  ///< private data not compared for near-duplicates, each with why

  /// Nothing shared by hash, nothing that could not be compared, no near-duplicate.
  bool disjoint() const { return shared == 0 && incomparable.empty() && !nearest; }
  /// For a refusal (printed, never written): what it shares, with counts and the nearest pair; empty
  /// when disjoint.
  std::string finding() const;
  /// For a caveat (written into a run directory): what it shares, without counts or record numbers,
  /// which would tell about the private records; empty when disjoint.
  std::string summary() const;
  /// What was looked for and what was not, in one line (record counts are N, which is public).
  std::string checked() const;
};

/// Compares `candidate` with every `private_data` entry: hashes (under `key` for keyed sets), then,
/// when no hash matched, near-duplicates with those whose images are given. `log` (may be null) gets
/// a line of progress for large checks.
Disjointness check_disjointness(const sdk::Dataset& candidate, const std::vector<ProtectedData>& private_data,
                                const RecordKey& key, std::ostream* log = nullptr);

}  // namespace privdiff::core
