#include "run/run_ledger.hpp"

#include "util/atomic_file.hpp"
#include "recipe/recipe_document.hpp"
#include "release/privacy_statement.hpp"
#include "run/run_checkpoint.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

RunLedger read_run_ledger(const fs::path& run_dir) {
  std::optional<sdk::PrivacyLedger> from_json, from_checkpoint;
  std::error_code ec;
  if (fs::is_regular_file(run_dir / "ledger.json", ec)) {
    try {
      from_json = sdk::privacy_ledger_from_json(read_file(run_dir / "ledger.json"));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error((run_dir / "ledger.json").string() + ": " + e.what());
    }
  }
  if (fs::is_regular_file(run_dir / "checkpoint.pt", ec)) {
    try {
      from_checkpoint = sdk::privacy_ledger_from_json(read_checkpoint_ledger(run_dir / "checkpoint.pt"));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error((run_dir / "checkpoint.pt").string() + ": its ledger: " + e.what());
    }
  }
  if (!from_json && !from_checkpoint) {
    throw std::runtime_error(run_dir.string() + ": not a run directory (no ledger.json, no checkpoint.pt)");
  }
  RunLedger out;
  out.json_steps = from_json ? from_json->steps() : -1;
  out.checkpoint_steps = from_checkpoint ? from_checkpoint->steps() : -1;
  const bool checkpoint_ahead = out.checkpoint_steps > out.json_steps;
  out.ledger = checkpoint_ahead ? *from_checkpoint : *from_json;
  const auto& other = checkpoint_ahead ? from_json : from_checkpoint;
  if (other) {
    for (const auto& caveat : other->caveats()) out.ledger.add_caveat(caveat);
  }
  if (checkpoint_ahead && from_json) {
    out.note = "checkpoint.pt records " + std::to_string(out.checkpoint_steps - out.json_steps) +
               " step(s) more than ledger.json (the run stopped between the two writes); using the checkpoint's "
               "ledger";
  } else if (from_checkpoint && out.json_steps > out.checkpoint_steps) {
    out.note = "ledger.json records " + std::to_string(out.json_steps - out.checkpoint_steps) +
               " step(s) beyond checkpoint.pt (spent after it by a run that then stopped); they stay spent";
  }
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
