#pragma once
// The privacy a run directory has spent, read so that it never under-reports: ledger.json and the
// ledger inside checkpoint.pt are both prefixes of one history, and a crash between their writes
// (or after a checkpoint, before the run failed) can leave either one ahead. The longer one holds
// everything the shorter does, so it is the run's ledger — once the release gate has checked that the
// shorter one's events are the longer one's first (release/ledger_agreement.hpp).

#include <privdiff/privacy/ledger.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace privdiff::core {

struct RunLedger {
  sdk::PrivacyLedger ledger;  ///< the longer of the two, with the caveats of both
  std::int64_t json_steps = -1;        ///< steps in ledger.json; -1 when it is missing
  std::int64_t checkpoint_steps = -1;  ///< steps in checkpoint.pt's ledger; -1 when there is none
  /// Empty when they agree; otherwise says which is ahead and by how much.
  std::string note;
};

/// Reads RUN_DIR/ledger.json and RUN_DIR/checkpoint.pt's ledger (either may be missing, not both).
/// Throws std::runtime_error naming the file when one is unreadable, release::ReleaseRefused (one line
/// naming both files) when they disagree in any event (release::agreed_ledger).
RunLedger read_run_ledger(const std::filesystem::path& run_dir);

/// The run's own target delta ([privacy] delta of its resolved recipe.toml); nullopt when it sets none.
/// Throws RecipeError when recipe.toml cannot be read.
std::optional<double> run_target_delta(const std::filesystem::path& run_dir);

/// Adds `caveat` to a run's guarantee after the fact (privdiff eval scoring against its private
/// data): to ledger.json (written from read_run_ledger's ledger, so it never shrinks) and to the
/// "caveats" of privacy.json and summary.json where they exist, so that account, compare and every
/// report show it. Atomic per file; throws std::runtime_error naming the file it cannot update.
void add_run_caveat(const std::filesystem::path& run_dir, const std::string& caveat);

}  // namespace privdiff::core
