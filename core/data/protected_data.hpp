#pragma once
// The private data a run protects, made ready for the data-identity service (disjointness.hpp): each
// private record set of a run and of its init_from ancestry (data-records.bin), with the images it was
// made from where the run that trained on it can be opened from its recorded recipe and those data still
// hold the set's records (matched by hash). With the images, near-duplicates are looked for as well as
// copies; without them the answer rests on the hashes, and each entry says why (ProtectedData::unopened).
// Used by every check of data beside the private records: public pretraining and a mechanism's public
// data (run/preflight.cpp), [[eval]]'s held-out split, and `privdiff eval` (run/evaluation_data_use.hpp).

#include "data/disjointness.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <memory>
#include <vector>

namespace privdiff::core {

struct OpenedProtectedData {
  std::vector<ProtectedData> data;
  std::vector<std::unique_ptr<sdk::Dataset>> opened;  ///< owns the images that `data` points to
};

/// One entry per private set of `sets` (public sets are skipped), described as "the data run R trained
/// on privately (DESCRIPTION)". `open` (may be empty: then nothing is opened) opens the datasets of a run
/// directory; each run is opened once. `key` compares keyed sets with the opened data.
OpenedProtectedData open_protected_data(const std::vector<RecordSet>& sets, const RecordKey& key,
                                        const RunDataOpener& open);

}  // namespace privdiff::core
