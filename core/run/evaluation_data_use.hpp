#pragma once
// `privdiff eval` of a run's samples follows the rules a recipe's [[eval]] follows: the real data it
// scores against must not hold the records the run protects — a noise-free statistic of them written
// into the run directory would be published with it — unless the user allows it
// (--allow-private-data), and then the run's guarantee says so wherever it is reported (ledger.json,
// privacy.json, summary.json, and so privdiff account and compare).
//
// Whether a split holds them is the data-identity service's answer (data/disjointness.hpp): the run's
// data-records.bin (what it and its init_from ancestry trained on privately, as keyed hashes), then
// near-duplicates against those data, reopened from the recipe.toml of the run that trained on them. A
// split that cannot be compared by hash (another record key, a run made before records were kept)
// counts as holding them; one compared by hash only (the private data cannot be opened here) is
// scored with a caveat that says so.

#include "data/disjointness.hpp"
#include "data/protected_data.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <privdiff/components/dataset.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

class PrivateRecordsGuard {
 public:
  /// `run_dir`: the run whose samples are scored; `allowed`: the user's opt-in; `open_run_data`: opens
  /// a run's data from its recipe.toml (null: near-duplicates are not compared); `log` (may be null):
  /// progress of large comparisons; `near_duplicates_stated`: the user states that near-duplicates (not
  /// copies) are independent pictures, which are then scored with a caveat. Throws std::runtime_error
  /// naming the file when the run's records cannot be read.
  PrivateRecordsGuard(std::filesystem::path run_dir, bool allowed, const RecordKey& key,
                      RunDataOpener open_run_data = {}, std::ostream* log = nullptr,
                      bool near_duplicates_stated = false);

  /// EvaluationPlan::check_split. Throws std::invalid_argument, naming the split and what it
  /// shares, for a split holding (or that may hold) the run's private records or near-duplicates of
  /// them, unless allowed.
  void check(const std::string& split, const sdk::Dataset& data);

  /// The splits read that hold (or may hold) the run's private records, with why.
  const std::vector<std::string>& private_splits() const { return private_splits_; }

  /// The caveat the run carries when private_splits() is not empty, or a split was compared by hash
  /// only (empty otherwise).
  std::string caveat(const std::string& result_file) const;

 private:
  /// The run's private data (and its ancestry's) for the service, opened once.
  const std::vector<ProtectedData>& protected_data();

  std::filesystem::path run_dir_;
  bool allowed_;
  const RecordKey& key_;
  RunDataOpener open_run_data_;
  std::ostream* log_;
  bool near_duplicates_stated_;
  std::optional<std::vector<RecordSet>> private_sets_;  // nullopt: unknown (counts as overlapping)
  std::string unknown_why_;
  std::optional<OpenedProtectedData> protected_;
  std::vector<std::string> private_splits_;
  std::vector<std::string> hashes_only_;  // splits compared by hash alone, with what was not compared
  std::vector<std::string> stated_;       // splits with near-duplicates, stated independent
};

}  // namespace privdiff::core
