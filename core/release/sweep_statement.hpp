#pragma once
// The release gate for a sweep: its guarantee from what every candidate spent, re-checked against the
// plan sweep.json recorded before any candidate ran. Papernot & Steinke's theorems hold when every
// candidate stays within the per-candidate budget and the choice among them depends on private data
// only through their (private) runs; a candidate that spent more than planned (a recipe edited before
// --resume, data that changed), or one scored on the private training data, breaks the theorem, and
// the gate refuses the release, saying why and what the search did cost.

#include "release/privacy_statement.hpp"
#include "selection/sweep_state.hpp"
#include "weights/model_export.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <vector>

namespace privdiff::core::release {

/// What one finished candidate left: its ledger (the longer of ledger.json and the checkpoint's) and
/// its [[eval]] results (eval-N.json).
struct CandidateRecord {
  std::size_t index = 0;
  sdk::PrivacyLedger ledger;
  std::vector<nlohmann::json> evals;
};

/// The sweep's statement: the selection's epsilon recomputed from the recorded count and budget,
/// every candidate's ledger checked within the budget, no score fitted to private training data, the
/// union of every candidate's caveats and the sweep's own. `candidates` holds one record per
/// candidate of `state` (all done). Throws ReleaseRefused naming the candidate and the figures.
PrivacyStatement sweep_statement(const SweepState& state, const std::vector<CandidateRecord>& candidates);

/// privacy.json of a sweep: the statement, the theorem, the count's distribution and the budget.
nlohmann::json sweep_privacy_json(const SweepState& state, const PrivacyStatement& statement);

/// The selected candidate's export (exported as its run) made the sweep's: the statement in its
/// metadata (no ledger: init_from refuses to carry a cost it cannot account) and its model card's
/// "Privacy guarantee" section, in place of the run's own figures.
void apply_to_export(ModelExport& e, const SweepState& state, const PrivacyStatement& statement);

/// "Papernot & Steinke 2022, Theorem 2 (RDP) ..." or, for a fixed K, plain composition.
std::string selection_theorem(const sdk::selection::CandidateCount& count);

}  // namespace privdiff::core::release
