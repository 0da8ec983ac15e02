#include "compare/run_record.hpp"

#include "run/atomic_file.hpp"

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
  try {
    return nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file.string() + ": not valid JSON (" + e.what() + ")");
  }
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

RunRecord load_run_record(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir.string() + ": not a directory");
  RunRecord r;
  r.dir = dir;
  r.summary = read_json(dir / "summary.json", true);
  r.privacy = read_json(dir / "privacy.json", true);
  r.eval = read_json(dir / "eval.json", false);
  r.name = r.summary.value("name", dir.filename().string());
  try {
    r.ledger = sdk::privacy_ledger_from_json(read_file(dir / "ledger.json"));
  } catch (const std::exception& e) {
    throw std::runtime_error((dir / "ledger.json").string() + ": " + e.what());
  }
  r.steps = r.ledger.steps();
  std::ifstream metrics(dir / "metrics.jsonl");
  std::int64_t offset = 0, last_step = 0;
  std::string stage;
  for (std::string line; std::getline(metrics, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("loss")) continue;
    if (j.value("stage", "") != stage) {  // steps restart at every stage
      offset += last_step;
      stage = j.value("stage", "");
    }
    last_step = j["step"].get<std::int64_t>();
    r.loss.emplace_back(offset + last_step, j["loss"].get<double>());
  }
  return r;
}

}  // namespace privdiff::core
