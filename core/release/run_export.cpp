#include "release/run_export.hpp"

#include "release/privacy_statement.hpp"
#include "util/json_file.hpp"

#include <privdiff/io/atomic_file.hpp>
#include <privdiff/privacy/event_json.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace privdiff::core::release {

namespace fs = std::filesystem;

namespace {

// The ledger the run wrote against the statement made from it: no step it does not cover, every caveat.
void check_against_ledger(const fs::path& ledger_file, nlohmann::json& p) {
  const sdk::PrivacyLedger ledger = sdk::privacy_ledger_from_json(sdk::read_file(ledger_file));
  const std::int64_t covered = p.value("ledger_steps", std::int64_t{0});
  if (p["private"].get<bool>() && ledger.steps() > covered) {
    throw ReleaseRefused(ledger_file.string() + " holds " + std::to_string(ledger.steps()) + " steps, but the "
                         "statement in summary.json covers " + std::to_string(covered) + ": the run went on after its "
                         "statement was made; finish it (privdiff run RECIPE --resume " + ledger_file.parent_path().string() +
                         ") before exporting");
  }
  auto& caveats = p["caveats"];
  if (!caveats.is_array()) caveats = nlohmann::json::array();
  for (const auto& caveat : ledger.caveats()) {
    if (std::find(caveats.begin(), caveats.end(), caveat) == caveats.end()) caveats.push_back(caveat);
  }
  p["ledger"] = read_json_file(ledger_file);
}

}  // namespace

nlohmann::json run_export_statement(const fs::path& run_dir) {
  const fs::path summary_file = run_dir / "summary.json";
  if (!fs::is_regular_file(summary_file)) {
    throw std::runtime_error(summary_file.string() + " is missing: the run has not finished, so its privacy "
                             "guarantee is not final (finish it with privdiff run RECIPE --resume " + run_dir.string() + ")");
  }
  const nlohmann::json summary = read_json_file(summary_file);
  nlohmann::json p;
  const auto& results = summary.value("privacy", nlohmann::json::array());
  p["private"] = !results.empty();
  p["accountant"] = summary.value("calibration_accountant", "");
  p["epsilon"] = nlohmann::json::object();
  for (const auto& r : results) p["epsilon"][r.value("accountant", "?")] = r.value("epsilon", 0.0);
  for (const char* key : {"delta", "target_epsilon", "ledger_steps", "data", "data_use", "caveats"}) {
    if (summary.contains(key)) p[key] = summary[key];
  }
  if (fs::is_regular_file(run_dir / "ledger.json")) check_against_ledger(run_dir / "ledger.json", p);
  return p;
}

ModelExport export_run(const fs::path& run_dir, sdk::Model& model) {
  const nlohmann::json privacy = run_export_statement(run_dir);
  ModelExport e = export_run_model(run_dir, model, privacy);
  const bool is_private = privacy["private"].get<bool>();
  const std::string accountant = privacy["accountant"].get<std::string>();
  e.metadata[export_keys::privacy] = privacy.dump();
  e.metadata[export_keys::accountant] = is_private ? accountant : "";
  e.metadata[export_keys::epsilon] = is_private ? export_number(privacy["epsilon"].value(accountant, 0.0)) : "";
  e.metadata[export_keys::delta] = is_private ? export_number(privacy.value("delta", 0.0)) : "";
  return e;
}

}  // namespace privdiff::core::release
