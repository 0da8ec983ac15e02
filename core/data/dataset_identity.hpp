#pragma once
// What a dataset is, by content: how privdiff decides that two datasets hold the same records,
// whatever their names, paths or plugins.
//
// A record is identified by its pixels (uint8, with the image shape): not by its label, its
// position or the file it came from. A copy, a subset, a reordering, a class filter, a symlink or a
// lossless re-encoding of the same images therefore shares records; the same picture under another
// label counts as the same record (the safe side). Lossy re-encoding or resizing is not detected.
//
// A captioned record is (image, label, caption). Its image alone still says whether two datasets
// share it (the same picture under another caption is the same person's picture); its caption goes
// into the ordered digest (a resume with other captions is other data) and, in its matching form
// (privdiff/text/caption_matching.hpp), into the caption digests that prompts are checked against.

#include "data/record_key.hpp"

#include <privdiff/components/dataset.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

struct DatasetIdentity {
  std::string name;
  std::int64_t size = 0;
  /// Plain (unkeyed) digest of every record and label in order: the resume check and the check that
  /// every rank of a multi-process run reads the same data. Kept in memory, never written: with
  /// all records but one, it would tell which candidate the missing one is.
  std::uint64_t ordered_digest = 0;
  /// Plain digests of the distinct records, sorted. Written only for public data (record_set.hpp).
  std::vector<std::uint64_t> records;
  /// Plain digests of the distinct captions' matching forms, sorted (caption_digest); empty for data
  /// without captions.
  std::vector<std::uint64_t> captions;

  /// "NAME|N=...|hash=..." with the hash keyed by the record key: what run directories record
  /// (checkpoint, summary.json). Equal for the same data in the same order under the same key.
  std::string fingerprint(const RecordKey& key) const;
};

/// The digest of one record: SipHash-2-4 under a fixed public key of the shape and the pixels.
std::uint64_t record_digest(const std::uint8_t* pixels, std::int64_t channels, std::int64_t height, std::int64_t width);

/// The digest of a caption's matching form (case, spacing and punctuation left out): SipHash-2-4
/// under the same public key. Throws std::invalid_argument for a caption that is not UTF-8.
std::uint64_t caption_digest(const std::string& caption);

/// How many values two sorted, distinct lists share (records two datasets have in common).
std::int64_t shared_records(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b);

/// Reads the dataset once, in chunks (bounded memory). `log` (may be null) gets a line for a large
/// dataset (over 50,000 records) and one every 10 s while it is read (counts of records: public N).
DatasetIdentity dataset_identity(const sdk::Dataset& data, std::ostream* log = nullptr);

}  // namespace privdiff::core
