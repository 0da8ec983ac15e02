#pragma once
// `privdiff sweep`'s plan: how many candidates (drawn once), their hyperparameters, the per-candidate
// privacy budget that makes the selection meet the target, and each candidate's noise within it.

#include "util/usage_error.hpp"
#include "selection/sweep_state.hpp"

#include <ostream>

namespace privdiff::core {

/// The plan of a new sweep: `state` holds what the user chose (recipe, overrides, space, score,
/// count, seed); fills in the target, the noise key, the budget, the sweep's epsilon, K and the
/// candidates. Throws UsageError for a recipe the sweep cannot account for.
void plan_sweep(SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log);

}  // namespace privdiff::core
