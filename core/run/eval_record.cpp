#include "run/eval_record.hpp"

#include "run/metrics_log.hpp"
#include "run/run_ledger.hpp"
#include "run/sample_origin.hpp"
#include "util/atomic_file.hpp"
#include "util/content_hash.hpp"

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

std::string set_name(const std::string& samples) {
  std::string name = fs::path(samples).filename().string();
  for (const char* suffix : {".gz", "-images-idx3-ubyte"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) name.resize(name.size() - s.size());
  }
  return name.empty() ? "samples" : name;
}

}  // namespace

fs::path kept_evaluation_path(const fs::path& run, const nlohmann::json& result) {
  // (The samples' path too: two sets of one name, say a release's train-images and a sampled
  // train-images, are two files.)
  const std::string hash = content_hash(result.value("samples", std::string()) + "|" +
                                        result.value("settings", nlohmann::json::object()).dump());
  return run / "evals" / (set_name(result.value("samples", std::string())) + "." + hash.substr(0, 8) + ".json");
}

void record_evaluation(const fs::path& run, const nlohmann::json& result, const std::string& caveat, bool whole_set,
                       std::ostream& log) {
  fs::create_directories(run);  // --run may name a new directory
  if (!caveat.empty() && has_run_records(run)) add_run_caveat(run, caveat);
  const fs::path kept = kept_evaluation_path(run, result);
  fs::create_directories(kept.parent_path());
  const std::string text = result.dump(2) + "\n";
  write_file_atomically(kept, text);
  if (whole_set) write_file_atomically(run / "eval.json", text);
  MetricsLog metrics;  // metrics.jsonl, and its TensorBoard events appended to (the run may be writing them)
  metrics.open(run, MetricsLog::Events::append);
  metrics.write(nlohmann::json{{"eval", result}});
  log << "recorded in " << kept.string() << (whole_set ? ", " + (run / "eval.json").string() : std::string()) << " and "
      << "metrics.jsonl\n";
  if (!whole_set) {
    log << "kept " << (run / "eval.json").string() << " as it was: this evaluation scored part of the sample set "
        << "(--max-samples), and eval.json holds scores of a whole set\n";
  }
}

}  // namespace privdiff::core
