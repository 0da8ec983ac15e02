#include "run/sample_origin.hpp"

#include "run/init_from.hpp"
#include "sample/sample_stamp.hpp"

#include <algorithm>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

bool has(const fs::path& dir, const char* name) {
  std::error_code ec;
  return fs::is_regular_file(dir / name, ec);
}

}  // namespace

bool has_run_records(const fs::path& dir) {
  return has(dir, "ledger.json") || has(dir, "checkpoint.pt") || has(dir, record_sets_file);
}

bool is_privdiff_run(const fs::path& dir) {
  if (has_run_records(dir)) return true;
  return has(dir, "recipe.toml") && (has(dir, "privacy.json") || has(dir, "summary.json") || has(dir, "metrics.jsonl"));
}

fs::path canonical_run(const fs::path& dir) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  return ec ? fs::absolute(dir).lexically_normal() : canonical;
}

fs::path enclosing_run(const fs::path& file) {
  const fs::path start = canonical_run(file).parent_path();
  if (start.filename() == "samples" && has(start.parent_path(), "recipe.toml")) return start.parent_path();
  for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
    if (is_privdiff_run(dir)) return dir;
    if (dir == dir.parent_path()) break;  // the root
  }
  return {};
}

SampleOrigin sample_origin(const std::vector<fs::path>& files, const fs::path& named_run) {
  SampleOrigin origin;
  std::vector<fs::path> unresolved_runs;
  auto add = [&origin](const fs::path& run, const std::string& how) {
    const fs::path place = canonical_run(run);
    if (std::find(origin.runs.begin(), origin.runs.end(), place) != origin.runs.end()) return;
    origin.runs.push_back(place);
    origin.how.push_back(how);
  };
  for (const auto& file : files) {
    if (file.empty()) continue;
    if (const fs::path run = enclosing_run(file); !run.empty()) {
      add(run, file.string() + " lies in run directory " + run.string());
    }
    const auto stamp = read_sample_stamp(file);
    if (!stamp) continue;
    const std::string carries = file.string() + " carries the stamp of run " + stamp->run.string();
    if (is_privdiff_run(stamp->run)) {
      add(stamp->run, carries);
    } else if (!named_run.empty() && !stamp->recipe_hash.empty() && run_recipe_hash(named_run) == stamp->recipe_hash) {
      add(named_run, carries + " (moved to " + named_run.string() + ", --run: the same recipe.toml)");
    } else if (std::find(unresolved_runs.begin(), unresolved_runs.end(), stamp->run) == unresolved_runs.end()) {
      unresolved_runs.push_back(stamp->run);
      origin.unresolved.push_back(carries + ", which is not a privdiff run directory here" +
                                  (named_run.empty() ? "" : " (and --run " + named_run.string() +
                                                                " holds another recipe.toml)"));
    }
  }
  return origin;
}

EvaluatedRunsGuard::EvaluatedRunsGuard(const fs::path& recorded, const SampleOrigin& origin, bool allowed,
                                       bool near_duplicates_stated, const RecordKey& key, RunDataOpener open_run_data,
                                       std::ostream& log) {
  std::vector<fs::path> runs = origin.runs;
  if (!recorded.empty() && std::find(runs.begin(), runs.end(), canonical_run(recorded)) == runs.end()) {
    runs.insert(runs.begin(), canonical_run(recorded));
  }
  for (const auto& run : runs) {
    if (!has_run_records(run)) continue;  // (--run may name a new directory)
    guards_.push_back(
        std::make_unique<PrivateRecordsGuard>(run, allowed, key, open_run_data, &log, near_duplicates_stated));
  }
  // A stamp whose run is not here: nothing to compare with, so like a run whose records are unknown,
  // refused unless the user allows it, and then said in the result.
  for (const auto& why : origin.unresolved) {
    if (!allowed) {
      throw std::runtime_error(why + ": its private data cannot be compared with the real data; give --run DIR "
                               "naming that run's directory now, or allow it with --allow-private-data (the result "
                               "then carries a caveat)");
    }
    unresolved_.push_back(why);
  }
}

void EvaluatedRunsGuard::check(const std::string& split, const sdk::Dataset& data) {
  for (auto& guard : guards_) guard->check(split, data);
}

std::string EvaluatedRunsGuard::caveat(const std::string& result_file) const {
  std::string text;
  for (const auto& guard : guards_) {
    const std::string one = guard->caveat(result_file);
    if (!one.empty()) text += (text.empty() ? "" : "; ") + one;
  }
  for (const auto& why : unresolved_) {
    text += (text.empty() ? "" : "; ") + result_file + " (privdiff eval --allow-private-data): " + why +
            ": the real data were not compared with its private data; its scores may be noise-free statistics of "
            "private records, not covered by the guarantee";
  }
  return text;
}

}  // namespace privdiff::core
