#pragma once
// `privdiff sweep`'s plan: how many candidates (drawn once), their hyperparameters, the per-candidate
// privacy budget that makes the selection meet the target, and each candidate's noise within it.

#include "cli/commands.hpp"
#include "sweep/sweep_state.hpp"

#include <ostream>

namespace privdiff::core::cli {

/// The plan of a new sweep: `state` holds what the user chose (recipe, overrides, space, score,
/// count, seed); fills in the target, the noise key, the budget, the sweep's epsilon, K and the
/// candidates. Throws UsageError for a recipe the sweep cannot account for.
void plan_sweep(SweepState& state, const GlobalOptions& global, std::ostream& log);

}  // namespace privdiff::core::cli
