#include "compare/run_record.hpp"

#include <algorithm>

#include "util/atomic_file.hpp"
#include "util/json_file.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <fstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& file, bool required) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    if (!required) return nullptr;
    throw std::runtime_error(file.parent_path().string() + ": not a finished privdiff run (no " +
                             file.filename().string() + ")");
  }
  return read_json_file(file);
}

}  // namespace

sdk::PrivacyEvent ledger_prefix(const sdk::PrivacyLedger& ledger, std::int64_t steps) {
  std::vector<sdk::PrivacyEvent> parts;
  for (const auto& e : ledger.entries()) {
    if (steps <= 0) break;
    const bool run = e.kind() == sdk::PrivacyEvent::Kind::self_composed;
    const std::int64_t n = run ? e.count() : 1;
    if (n <= steps) {
      parts.push_back(e);
    } else {
      parts.push_back(sdk::PrivacyEvent::self_composed(e.inner(), steps));
    }
    steps -= n;
  }
  return sdk::PrivacyEvent::composed(std::move(parts));
}

nlohmann::json evaluation_in_current_form(nlohmann::json eval) {
  if (!eval.is_object() || eval.contains("evaluators")) return eval;
  // privdiff < 0.10 wrote DPDM's protocol without evaluator plugins: the same numbers, renamed.
  nlohmann::json classifiers = nlohmann::json::object(), fidelity = nlohmann::json::object();
  const nlohmann::json accuracy = eval.value("accuracy", nlohmann::json::object());
  for (const auto& [name, value] : accuracy.items()) {
    classifiers["accuracy." + name] = value;
  }
  for (const char* name : {"frechet_distance", "frechet_floor", "precision", "recall"}) {
    if (eval.contains(name)) fidelity[name] = eval[name];
  }
  eval["evaluators"] = nlohmann::json::object();
  if (!classifiers.empty()) {
    eval["evaluators"]["dpdm_classifiers"] = {
        {"metrics", classifiers},
        {"provenance", "DPDM's classifiers, " + std::to_string(eval.value("epochs", 0)) + " epochs (privdiff < 0.10)"}};
  }
  if (!fidelity.empty()) {
    eval["evaluators"]["feature_cnn"] = {{"metrics", fidelity}, {"provenance", eval.value("features", std::string())}};
  }
  return eval;
}

void use_guarantee(RunRecord& r, const release::PrivacyStatement& statement, const sdk::PrivacyLedger& ledger) {
  r.ledger = ledger;
  r.steps = ledger.steps();
  r.privacy = release::run_privacy_json(statement, ledger);
}

RunRecord load_run_record(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir.string() + ": not a directory");
  RunRecord r;
  r.dir = dir;
  r.summary = read_json(dir / "summary.json", true);
  r.eval = evaluation_in_current_form(read_json(dir / "eval.json", false));
  r.name = r.summary.value("name", dir.filename().string());
  // One loss curve per stage; each stage's steps start at 1.
  for (const auto& stage : r.summary.value("stages", nlohmann::json::array())) {
    RunRecord::StageLoss loss{stage.value("name", std::string()), {}, {}};
    if (stage.value("private", false)) {
      loss.missing = "a private stage: its loss is a noise-free statistic of the private data, logged only with "
                     "[run] private_diagnostics = true";
    }
    r.losses.push_back(std::move(loss));
  }
  std::ifstream metrics(dir / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("loss") || !j["loss"].is_number()) continue;
    const std::string stage = j.value("stage", "");
    auto it = std::find_if(r.losses.begin(), r.losses.end(), [&](const auto& l) { return l.stage == stage; });
    if (it == r.losses.end()) it = r.losses.insert(r.losses.end(), RunRecord::StageLoss{stage, {}, {}});
    it->points.emplace_back(j["step"].get<std::int64_t>(), j["loss"].get<double>());
    it->missing.clear();
  }
  for (auto& loss : r.losses) {
    if (loss.points.empty() && loss.missing.empty()) loss.missing = "no loss in metrics.jsonl";
  }
  return r;
}

}  // namespace privdiff::core
