#pragma once
// Which run a set of images given to `privdiff eval` belongs to, so that it is scored under that run's
// rules (the private-data checks and caveats of run/evaluation_data_use.hpp) whether or not --run names
// it. Two ways, both looked at:
//  - by place: a file inside a run directory (RUN/samples/…, RUN/released-NAME/…, anything deeper),
//    found by the run's own files in the nearest enclosing directory;
//  - by content: the run's stamp in the files' gzip headers (sample/sample_stamp.hpp), which every
//    sample set and release a run writes carries, so a copy elsewhere is still known. A stamp whose
//    run is no longer where it was is resolved by --run naming a run with the stamped recipe; else it
//    stays unresolved (the caller refuses, or scores with a caveat on the user's word).
// Not caught: images re-encoded (decompressed, converted, re-saved) outside a run directory.

#include "run/evaluation_data_use.hpp"

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

/// Whether `dir` is a privdiff run directory, by its own files: ledger.json, checkpoint.pt or
/// data-records.bin; or recipe.toml beside privacy.json, summary.json or metrics.jsonl.
bool is_privdiff_run(const std::filesystem::path& dir);

/// Whether `dir` holds what a run's privacy checks read (ledger.json, checkpoint.pt or
/// data-records.bin).
bool has_run_records(const std::filesystem::path& dir);

/// The nearest directory enclosing `file` that is a run (or RUN of RUN/samples/FILE when RUN has a
/// recipe.toml, a run killed before it kept anything else); empty when there is none.
std::filesystem::path enclosing_run(const std::filesystem::path& file);

struct SampleOrigin {
  std::vector<std::filesystem::path> runs;  ///< distinct, in the order found (the images' first)
  std::vector<std::string> how;             ///< one line per run: why the set is that run's
  std::vector<std::string> unresolved;      ///< stamps naming a run that is not here, each with why
};

/// The runs `files` (an eval's images and labels) belong to. `named_run` (may be empty): the
/// command's --run, which resolves a stamp of a run that moved there (same recipe.toml content).
SampleOrigin sample_origin(const std::vector<std::filesystem::path>& files, const std::filesystem::path& named_run);

/// One spelling per directory, for comparing runs found in different ways.
std::filesystem::path canonical_run(const std::filesystem::path& dir);

/// The private-data checks of every run an eval's scores concern: the one they are recorded in
/// (`recorded`: --run, or the images' own; may be empty or a new directory) and every run in
/// `origin`, each exactly as PrivateRecordsGuard checks the run --run names.
class EvaluatedRunsGuard {
 public:
  /// Throws std::runtime_error when a run's records cannot be read, or for an unresolved stamp in
  /// `origin` unless `allowed` (there is nothing to compare the real data with; allowed, the result
  /// carries a caveat).
  EvaluatedRunsGuard(const std::filesystem::path& recorded, const SampleOrigin& origin, bool allowed,
                     bool near_duplicates_stated, const RecordKey& key, RunDataOpener open_run_data,
                     std::ostream& log);

  /// No run to check.
  bool empty() const { return guards_.empty(); }
  /// EvaluationPlan::check_split: every run's check (the first refusal throws).
  void check(const std::string& split, const sdk::Dataset& data);
  /// The caveats of every run's check and of each unresolved stamp let through (empty: none).
  std::string caveat(const std::string& result_file) const;

 private:
  std::vector<std::unique_ptr<PrivateRecordsGuard>> guards_;
  std::vector<std::string> unresolved_;
};

}  // namespace privdiff::core
