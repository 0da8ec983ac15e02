#include "run/run_ledger.hpp"

#include "util/atomic_file.hpp"
#include "recipe/recipe_document.hpp"
#include "release/ledger_agreement.hpp"
#include "release/privacy_statement.hpp"
#include "run/run_checkpoint.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

RunLedger read_run_ledger(const fs::path& run_dir) {
  std::optional<release::LedgerCopy> from_json, from_checkpoint;
  std::error_code ec;
  if (fs::is_regular_file(run_dir / "ledger.json", ec)) {
    try {
      from_json = release::LedgerCopy{run_dir / "ledger.json", sdk::privacy_ledger_from_json(read_file(run_dir / "ledger.json"))};
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error((run_dir / "ledger.json").string() + ": " + e.what());
    }
  }
  if (fs::is_regular_file(run_dir / "checkpoint.pt", ec)) {
    try {
      from_checkpoint = release::LedgerCopy{run_dir / "checkpoint.pt",
                                            sdk::privacy_ledger_from_json(read_checkpoint_ledger(run_dir / "checkpoint.pt"))};
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error((run_dir / "checkpoint.pt").string() + ": its ledger: " + e.what());
    }
  }
  if (!from_json && !from_checkpoint) {
    throw std::runtime_error(run_dir.string() + ": not a run directory (no ledger.json, no checkpoint.pt)");
  }
  // Both are prefixes of one history: the longer one, once the release gate has checked that the
  // shorter one's events are its first (a record edited, or copied from another run, is refused).
  release::AgreedLedger agreed = release::agreed_ledger(from_json, from_checkpoint);
  RunLedger out;
  out.ledger = std::move(agreed.ledger);
  out.json_steps = agreed.json_steps;
  out.checkpoint_steps = agreed.checkpoint_steps;
  out.note = std::move(agreed.note);
  return out;
}

std::optional<double> run_target_delta(const fs::path& run_dir) {
  const auto recipe = RecipeDocument::load(run_dir / "recipe.toml");
  return recipe.root()["privacy"]["delta"].value<double>();
}

void add_run_caveat(const fs::path& run_dir, const std::string& caveat) {
  sdk::PrivacyLedger ledger = read_run_ledger(run_dir).ledger;
  ledger.add_caveat(caveat);
  write_file_atomically(run_dir / "ledger.json", sdk::to_json(ledger));
  release::add_caveat_to_reports(run_dir, caveat);
}

}  // namespace privdiff::core
