#pragma once
// `privdiff eval` of a run's samples follows the rules a recipe's [[eval]] follows: the real data it
// scores against must not hold the records the run protects — a noise-free statistic of them written
// into the run directory would be published with it — unless the user allows it
// (--allow-private-data), and then the run's guarantee says so wherever it is reported (ledger.json,
// privacy.json, summary.json, and so privdiff account and compare).
//
// Records are compared by content (data/record_set.hpp), with the run's data-records.bin: what it and
// its init_from ancestry trained on privately. A split that cannot be compared (another record key, a
// run made before records were kept) counts as holding them.

#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <privdiff/components/dataset.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

class PrivateRecordsGuard {
 public:
  /// `run_dir`: the run whose samples are scored; `allowed`: the user's opt-in. Throws
  /// std::runtime_error naming the file when the run's records cannot be read.
  PrivateRecordsGuard(std::filesystem::path run_dir, bool allowed, const RecordKey& key);

  /// EvaluationPlan::check_split. Throws std::invalid_argument, naming the split and what it
  /// shares, for a split holding (or that may hold) the run's private records, unless allowed.
  void check(const std::string& split, const sdk::Dataset& data);

  /// The splits read that hold (or may hold) the run's private records, with why.
  const std::vector<std::string>& private_splits() const { return private_splits_; }

  /// The caveat the run carries when private_splits() is not empty (empty otherwise).
  std::string caveat(const std::string& result_file) const;

 private:
  std::filesystem::path run_dir_;
  bool allowed_;
  const RecordKey& key_;
  std::optional<std::vector<RecordSet>> private_sets_;  // nullopt: unknown (counts as overlapping)
  std::string unknown_why_;
  std::vector<std::string> private_splits_;
};

}  // namespace privdiff::core
