#include "release/ledger_agreement.hpp"

#include "release/privacy_statement.hpp"
#include "util/content_hash.hpp"

#include <stdexcept>

namespace privdiff::core::release {

namespace fs = std::filesystem;
using sdk::PrivacyEvent;

namespace {

// Whether `earlier` is what the entry `later` was before more steps were recorded into it: the same
// event, or a shorter run of the same repeated event (a single event being a run of one).
bool grows_into(const PrivacyEvent& earlier, const PrivacyEvent& later) {
  if (earlier == later) return true;
  if (later.kind() != PrivacyEvent::Kind::self_composed) return false;
  if (earlier == later.inner()) return true;
  return earlier.kind() == PrivacyEvent::Kind::self_composed && earlier.inner() == later.inner() &&
         earlier.count() <= later.count();
}

// The first entry where `shorter` is not the start of `longer`, described; empty when it is.
std::string first_difference(const LedgerCopy& shorter, const LedgerCopy& longer) {
  const auto& s = shorter.ledger.entries();
  const auto& l = longer.ledger.entries();
  const std::string in_shorter = " in " + shorter.file.filename().string();
  const std::string in_longer = " in " + longer.file.filename().string();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::string entry = "entry " + std::to_string(i + 1) + " is ";
    if (i >= l.size()) return entry + s[i].to_string() + in_shorter + " but missing" + in_longer;
    const bool last = i + 1 == s.size();
    if (last ? !grows_into(s[i], l[i]) : s[i] != l[i]) {
      return entry + s[i].to_string() + in_shorter + " but " + l[i].to_string() + in_longer;
    }
  }
  return "";
}

}  // namespace

AgreedLedger agreed_ledger(const std::optional<LedgerCopy>& json, const std::optional<LedgerCopy>& checkpoint) {
  if (!json && !checkpoint) throw std::invalid_argument("agreed_ledger: no ledger");
  AgreedLedger out;
  out.json_steps = json ? json->ledger.steps() : -1;
  out.checkpoint_steps = checkpoint ? checkpoint->ledger.steps() : -1;
  const bool checkpoint_ahead = out.checkpoint_steps > out.json_steps;
  const LedgerCopy& longer = checkpoint_ahead ? *checkpoint : *json;
  const std::optional<LedgerCopy>& other = checkpoint_ahead ? json : checkpoint;
  out.ledger = longer.ledger;
  if (!other) return out;
  if (const std::string why = first_difference(*other, longer); !why.empty()) {
    throw ReleaseRefused(json->file.string() + " and " + checkpoint->file.string() + " disagree about what the run "
                         "spent: " + why + "; one of them was edited or comes from another run, and no guarantee is "
                         "stated from privacy records that disagree (restore the run's own files)");
  }
  for (const auto& caveat : other->ledger.caveats()) out.ledger.add_caveat(caveat);
  if (checkpoint_ahead) {
    out.note = "checkpoint.pt records " + std::to_string(out.checkpoint_steps - out.json_steps) +
               " step(s) more than ledger.json (the run stopped between the two writes); using the checkpoint's "
               "ledger";
  } else if (out.json_steps > out.checkpoint_steps) {
    out.note = "ledger.json records " + std::to_string(out.json_steps - out.checkpoint_steps) +
               " step(s) beyond checkpoint.pt (spent after it by a run that then stopped); they stay spent";
  }
  return out;
}

void check_checkpoint_recipe(const fs::path& checkpoint, const std::string& recorded, const fs::path& recipe_file,
                             const std::string& recipe_text) {
  if (recorded.empty()) return;  // no hash recorded: the ledgers' agreement is the check
  const std::string now = content_hash(recipe_text);
  if (now == recorded) return;
  throw ReleaseRefused(checkpoint.string() + " was trained under a recipe with hash " + recorded + ", but " +
                       recipe_file.string() + " has hash " + now + ": the recipe was edited after the run wrote it, or "
                       "the checkpoint comes from another run, so neither the recipe nor the run's guarantee describes "
                       "these weights (restore the run's own recipe.toml and checkpoint.pt)");
}

}  // namespace privdiff::core::release
