#pragma once
// The records a run trained on, by content, as its run directory keeps them (data-records.bin):
// one set per dataset it (or an init_from ancestor) trained on, private or public.
//
// Private sets hold the records' digests keyed by the record key (record_key.hpp), so that a
// published run directory offers no membership test; public sets hold the plain digests. A later
// run compares its own data with them: public sets always, private sets only under the same key
// (otherwise the overlap is unknown, and privdiff takes the safe side).

#include "data/dataset_identity.hpp"
#include "data/record_key.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::core {

struct RecordSet {
  bool is_private = false;
  std::string key_id;       ///< the record key's id (private sets); empty for public sets
  std::string description;  ///< the dataset's name and size, for messages
  std::string origin;       ///< the run directory that trained on it (this run or an ancestor)
  std::vector<std::uint64_t> hashes;  ///< sorted; a private set is padded to N with random values
  /// The captions' matching-form digests (DatasetIdentity::captions), keyed and padded alike for a
  /// private set; empty for data without captions (and in files written before captions were).
  std::vector<std::uint64_t> caption_hashes;
};

/// A private set: the identity's digests keyed by `key`, padded with random hashes to the dataset's
/// size (the number of duplicate records is not public).
RecordSet private_record_set(const DatasetIdentity& data, const RecordKey& key, const std::string& origin);
/// A public set: the plain digests.
RecordSet public_record_set(const DatasetIdentity& data, const std::string& origin);

/// How many records of `data` a recorded set holds; unknown when the set is private under another
/// key than `key` (its hashes cannot be compared).
struct Overlap {
  bool known = true;
  std::int64_t records = 0;
  bool any() const { return !known || records > 0; }  ///< the safe reading: unknown counts as shared
};
Overlap overlap(const DatasetIdentity& data, const RecordSet& set, const RecordKey& key);

/// The key ids of the private sets a run records for an init_from source without records: a privdiff run
/// or export whose data were never recorded, and weights from outside privdiff. Under no real key, both
/// compare as unknown with any data (the safe side); prompts are held against the first only.
inline constexpr const char* unknown_ancestry_key = "unknown";
inline constexpr const char* outside_weights_key = "outside privdiff";

/// The file in a run directory that holds its record sets.
inline constexpr const char* record_sets_file = "data-records.bin";

/// The sets as data-records.bin holds them: a version line, then little-endian u64 counts and
/// length-prefixed strings, the hashes, the caption hashes, and a checksum of everything before it.
std::string record_sets_to_bytes(const std::vector<RecordSet>& sets);
/// Reads them back (version 1, before captions, as well). Throws std::runtime_error ("damaged: ...")
/// for anything else.
std::vector<RecordSet> record_sets_from_bytes(const std::string& bytes);

}  // namespace privdiff::core
