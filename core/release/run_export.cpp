#include "release/run_export.hpp"

#include "recipe/reproducible_noise.hpp"
#include "util/json_file.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace privdiff::core::release {

namespace fs = std::filesystem;

namespace {

// A run that went on after it finished (its summary.json's statement) has weights its summary does not
// describe: finish it first.
void check_finished(const fs::path& run_dir, const nlohmann::json& summary, const sdk::PrivacyLedger& ledger) {
  const std::int64_t covered = summary.value("ledger_steps", std::int64_t{0});
  if (!ledger.entries().empty() && ledger.steps() > covered) {
    throw ReleaseRefused((run_dir / "ledger.json").string() + " holds " + std::to_string(ledger.steps()) + " steps, "
                         "but the statement in summary.json covers " + std::to_string(covered) + ": the run went on "
                         "after its statement was made; finish it (privdiff run RECIPE --resume " + run_dir.string() +
                         ") before exporting");
  }
}

}  // namespace

std::string public_seed_caveat() {
  return "reproducible noise from seed 0 (secure_noise = false with no seed set: privdiff's public default): anyone "
         "can reproduce this run's noise and batches, so its guarantee does not hold";
}

bool draws_noise_from_public_seed(const Recipe& recipe) {
  for (const auto& stage : recipe.stages) {
    if (!draws_reproducible_noise(stage)) continue;
    const sdk::Config& config = stage.mechanism.config;
    const std::int64_t seed = config.has("seed") ? config.get_int("seed") : recipe.run.get_int("seed");
    if (seed == 0) return true;
  }
  return false;
}

nlohmann::json run_export_statement(const fs::path& run_dir, const PrivacyStatement& statement,
                                    const sdk::PrivacyLedger& ledger) {
  const fs::path summary_file = run_dir / "summary.json";
  if (!fs::is_regular_file(summary_file)) {
    throw std::runtime_error(summary_file.string() + " is missing: the run has not finished, so its privacy "
                             "guarantee is not final (finish it with privdiff run RECIPE --resume " + run_dir.string() + ")");
  }
  const nlohmann::json summary = read_json_file(summary_file);
  check_finished(run_dir, summary, ledger);
  const bool spent = !ledger.entries().empty();
  if (spent && statement.accountant.empty()) {
    throw ReleaseRefused((run_dir / "ledger.json").string() + " spent privacy, but the run's accountant gives no "
                         "epsilon for it" + (statement.results.empty() ? " (its recipe sets no [privacy] delta)" : ": " +
                         statement.results.dump()) + "; a private model is not exported without its guarantee");
  }
  nlohmann::json p;
  p["private"] = spent;
  p["accountant"] = statement.accountant;
  p["epsilon"] = nlohmann::json::object();
  for (const auto& r : statement.results) {
    if (r.contains("epsilon")) p["epsilon"][r.value("accountant", "?")] = r["epsilon"];
  }
  if (statement.delta > 0) p["delta"] = statement.delta;
  p["ledger_steps"] = ledger.steps();
  for (const char* key : {"target_epsilon", "data", "data_use"}) {
    if (summary.contains(key)) p[key] = summary[key];
  }
  nlohmann::json caveats = statement.caveats;
  for (const auto& caveat : summary.value("caveats", nlohmann::json::array())) {
    if (std::find(caveats.begin(), caveats.end(), caveat) == caveats.end()) caveats.push_back(caveat);
  }
  p["caveats"] = caveats;
  p["ledger"] = nlohmann::json::parse(sdk::to_json(ledger));
  return p;
}

ModelExport export_run(const fs::path& run_dir, sdk::Model& model, const Recipe& recipe,
                       const PrivacyStatement& statement, const sdk::PrivacyLedger& ledger) {
  nlohmann::json privacy = run_export_statement(run_dir, statement, ledger);
  if (privacy["private"].get<bool>() && draws_noise_from_public_seed(recipe)) {
    privacy["caveats"].push_back(public_seed_caveat());
  }
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
