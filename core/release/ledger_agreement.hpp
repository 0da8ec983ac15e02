#pragma once
// The gate's first check of a run directory: its two records of what the run spent, ledger.json and
// the copy inside checkpoint.pt, are prefixes of one history (a crash between their writes can leave
// either one ahead), so the shorter one's events must be the longer one's first events — every
// event's kind, noise multiplier, sampling rate and count. Records that disagree in any event were
// edited, or come from two runs, and nothing is published from them. And the checkpoint whose weights
// are published must be the run's own: it records the hash of the recipe.toml it was trained under.

#include <privdiff/privacy/ledger.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace privdiff::core::release {

/// One record of a run's ledger, with the file it was read from.
struct LedgerCopy {
  std::filesystem::path file;
  sdk::PrivacyLedger ledger;
};

struct AgreedLedger {
  sdk::PrivacyLedger ledger;           ///< the longer of the two, with the caveats of both
  std::int64_t json_steps = -1;        ///< steps in ledger.json; -1 when it is missing
  std::int64_t checkpoint_steps = -1;  ///< steps in checkpoint.pt's ledger; -1 when there is none
  /// Empty when they hold the same events; otherwise says which is ahead and by how much.
  std::string note;
};

/// The run's ledger from ledger.json (`json`) and checkpoint.pt's copy (`checkpoint`), either of which
/// may be missing (not both). Throws ReleaseRefused, in one line naming both files and the first entry
/// where they differ, when the shorter one's events are not the start of the longer one's; caveats may
/// differ (an evaluation after the run adds one to ledger.json only) and are joined.
AgreedLedger agreed_ledger(const std::optional<LedgerCopy>& json, const std::optional<LedgerCopy>& checkpoint);

/// Throws ReleaseRefused, naming both files, unless `recipe_text` (the contents of `recipe_file`) is the
/// recipe `checkpoint` was trained under: `recorded` is the recipe hash (core::content_hash) the
/// checkpoint recorded. An edited recipe.toml, or a checkpoint copied from another run, is refused. A
/// checkpoint that recorded no hash (`recorded` empty; every checkpoint privdiff writes records one) is
/// accepted on its ledger's agreement with ledger.json alone.
void check_checkpoint_recipe(const std::filesystem::path& checkpoint, const std::string& recorded,
                             const std::filesystem::path& recipe_file, const std::string& recipe_text);

}  // namespace privdiff::core::release
