#pragma once
// Where `privdiff eval --run RUN` keeps its scores: every evaluation in RUN/evals/, one file per
// sample set and settings, and RUN/eval.json (what compare and the report show) only for a score of
// a whole sample set, so a smoke test (--max-samples) never replaces the run's scores.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>
#include <string>

namespace privdiff::core {

/// The file in RUN/evals/ for `result` (its "samples" and "settings"): the sample set's name (its
/// IDX file's, without "-images-idx3-ubyte[.gz]") and a hash of its path and the settings, so that
/// the same set scored with the same settings replaces only its own earlier score.
std::filesystem::path kept_evaluation_path(const std::filesystem::path& run, const nlohmann::json& result);

/// Records `result` in `run`: the caveat first (so a kill between the writes never leaves the
/// scores without it), then RUN/evals/NAME.json, RUN/eval.json when `whole_set` (every image of the
/// sample set was scored), and a line in metrics.jsonl. Says on `log` where it went and, when
/// eval.json was kept, why.
void record_evaluation(const std::filesystem::path& run, const nlohmann::json& result, const std::string& caveat,
                       bool whole_set, std::ostream& log);

}  // namespace privdiff::core
