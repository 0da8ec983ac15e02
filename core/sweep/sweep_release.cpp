#include "sweep/sweep_release.hpp"

#include "run/recipe_loading.hpp"
#include "release/run_export.hpp"
#include "release/sweep_statement.hpp"
#include "run/composed_run.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_guarantee.hpp"
#include "run/run_ledger.hpp"
#include "weights/model_export.hpp"

#include <privdiff/io/atomic_file.hpp>

#include <nlohmann/json.hpp>

#include <regex>

namespace privdiff::core {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The candidate's directory, candidates/N, tells that K > N: the theorem covers the best alone, not its
// place among the K. Released text names the release's own directory instead, however the sweep's
// directory was written when the candidate ran (relative, ./DIR, absolute).
std::string without_candidate_path(const std::string& text, const fs::path& run_dir) {
  const std::regex candidate_dir("candidates/" + run_dir.filename().string() + "(?![0-9])");
  return std::regex_replace(text, candidate_dir, "selected");
}

// The same for every string in a JSON document, before it is written: in the written text a path with
// a quote, a backslash or a control character is escaped, and a search for it there would miss.
void without_candidate_path(json& value, const fs::path& run_dir) {
  if (value.is_string()) {
    value = without_candidate_path(value.get<std::string>(), run_dir);
  } else if (value.is_structured()) {
    for (auto& item : value) without_candidate_path(item, run_dir);
  }
}

// The selected run's model exported with the sweep's guarantee (the gate's statement) in place of the run's own.
void export_selected(const SweepState& s, const release::PrivacyStatement& statement, const fs::path& run_dir,
                     const fs::path& out, const std::vector<std::string>& plugin_paths) {
  const RunFiles files = run_files(run_dir.string(), "sweep");
  ComponentRegistry registry;
  const Recipe recipe = load_recipe(files.recipe.string(), {}, plugin_paths, registry);
  auto model = create_model(recipe, registry);
  load_model_weights(files.checkpoint, *model);
  const RunGuarantee guarantee = run_guarantee(files.run_dir, files.checkpoint, recipe, registry);
  ModelExport e = release::export_run(files.run_dir, *model, recipe, guarantee.statement, guarantee.ledger);
  release::apply_to_export(e, s, statement);
  e.model_card = without_candidate_path(e.model_card, run_dir);
  write_model_export(e, out);
}

// A run's [[eval]] results, eval-0.json, eval-1.json, ... in order.
std::vector<json> eval_results(const fs::path& run_dir) {
  std::vector<json> results;
  for (int e = 0; fs::is_regular_file(run_dir / ("eval-" + std::to_string(e) + ".json")); ++e) {
    results.push_back(json::parse(sdk::read_file(run_dir / ("eval-" + std::to_string(e) + ".json"))));
  }
  return results;
}

// What every candidate left for the gate: its ledger and its [[eval]] results.
std::vector<release::CandidateRecord> candidate_records(const SweepState& s, const fs::path& dir) {
  std::vector<release::CandidateRecord> records;
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const fs::path run_dir = dir / "candidates" / std::to_string(i);
    release::CandidateRecord r;
    r.index = i;
    try {
      r.ledger = read_run_ledger(run_dir).ledger;
    } catch (const std::runtime_error& e) {
      throw UsageError("sweep: release refused: candidate " + std::to_string(i) + "'s ledger cannot be read (" + e.what() +
                       "): the guarantee is computed from what every candidate spent");
    }
    r.evals = eval_results(run_dir);
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace

double candidate_score(const fs::path& run_dir, const std::string& metric) {
  std::string seen;
  for (const json& result : eval_results(run_dir)) {
    for (const auto& [evaluator, scored] : result.at("evaluators").items()) {
      for (const auto& [name, value] : scored.at("metrics").items()) {
        if (metric == evaluator + "." + name && value.is_number()) return value.get<double>();
        seen += (seen.empty() ? "" : ", ") + evaluator + "." + name;
      }
    }
  }
  throw UsageError("sweep --score " + metric + ": " + run_dir.string() + " has no such [[eval]] metric (it has: " +
                   (seen.empty() ? std::string("no [[eval]] results") : seen) + ")");
}

void release_sweep(SweepState& s, const fs::path& dir, const std::vector<std::string>& plugin_paths, std::ostream& log) {
  release::PrivacyStatement statement;
  try {
    statement = release::sweep_statement(s, candidate_records(s, dir));
  } catch (const release::ReleaseRefused& e) {
    throw UsageError(std::string("sweep: release refused: ") + e.what());
  }
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const auto& score = s.candidates[i].score;
    if (!score) continue;
    if (!best || (s.maximize ? *score > *s.candidates[*best].score : *score < *s.candidates[*best].score)) best = i;
  }
  s.selected = best;
  json report = release::sweep_privacy_json(s, statement);
  if (best) {
    const auto& c = s.candidates[*best];
    const fs::path run_dir = dir / "candidates" / std::to_string(*best);
    const fs::path staging = dir / "selected.partial";
    fs::remove_all(staging);
    export_selected(s, statement, run_dir, staging, plugin_paths);
    for (const auto& entry : fs::directory_iterator(run_dir)) {
      const std::string name = entry.path().filename().string();
      if (name == "samples.png") fs::copy_file(entry.path(), staging / name);
      if (name.rfind("eval-", 0) == 0 && entry.path().extension() == ".json") {
        json result = json::parse(sdk::read_file(entry.path()));
        result.erase("samples");  // the eval's images stay with the candidate (deleted)
        without_candidate_path(result, run_dir);
        sdk::write_file_atomically(staging / name, result.dump(2) + "\n");
      }
    }
    fs::remove_all(dir / "selected");
    fs::rename(staging, dir / "selected");
    report["selected"] = {{"hyperparameters", c.values}, {"noise_multiplier", c.noise_multiplier}, {"score", *c.score},
                          {"score_metric", s.score}, {"single_run_epsilon", c.single_run_epsilon}};
    log << "sweep: selected " << json(c.values).dump() << " (" << s.score << " " << *c.score << ", noise multiplier "
        << c.noise_multiplier << "): " << (dir / "selected").string() << "\n";
  } else {
    log << "sweep: no candidate ran (K = 0 may be drawn under a Poisson count): nothing is released but the guarantee\n";
  }
  release::write_privacy_json(dir, report);
  s.released = true;
}

}  // namespace privdiff::core
