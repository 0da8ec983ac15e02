#pragma once
// The near-duplicate check's answers kept per user (util/cache_directory.hpp, near-duplicates/, owner
// only): the same two datasets, by content and in order, get the same answer, so a sweep's plan and its
// candidates, or each `privdiff eval` of a run's samples, compare Fashion-MNIST's 10,000 test images
// with its 60,000 training images once (74 s on 2 cores) instead of every time.
//
// An answer is filed under a hash keyed by the record key (record_key.hpp) of both datasets' ordered
// digests, the threshold and the check's version: the file names offer no test of which data were
// compared. Where there is no record key, or the cache cannot be written, the check just runs.

#include "data/near_duplicates.hpp"

#include <privdiff/components/dataset.hpp>

#include <ostream>
#include <vector>

namespace privdiff::core {

/// find_near_duplicates(a, b, threshold, log), read back from the cache when it holds the answer.
std::vector<NearDuplicate> remembered_near_duplicates(const sdk::Dataset& a, const sdk::Dataset& b,
                                                      double threshold = near_duplicate_threshold,
                                                      std::ostream* log = nullptr);

}  // namespace privdiff::core
