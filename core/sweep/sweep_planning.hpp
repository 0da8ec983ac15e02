#pragma once
// `privdiff sweep`'s plan: how many candidates (drawn once), their hyperparameters, the per-candidate
// privacy budget that makes the selection meet the target, and each candidate's noise within it.

#include "util/usage_error.hpp"
#include "selection/sweep_state.hpp"

#include <ostream>

namespace privdiff::core {

/// The part of the plan that draws nothing: `state` holds what the user chose (recipe, overrides, space,
/// score, count, seed); checks the score and every value the search can draw, and fills in the target,
/// the noise key, the budget and the sweep's epsilon. Throws UsageError for a recipe the sweep cannot
/// account for.
void plan_budget(SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log);

/// plan_budget, then K (drawn once) and the candidates with their noise.
void plan_sweep(SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log);

/// A resumed sweep runs the code it was planned with: throws UsageError when the plugins found now give
/// any component of the recipe another library (path and SHA-256) than state.libraries records. A state
/// of an older privdiff (no record) is resumed with a warning on `log`.
void check_code_unchanged(const SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log);

}  // namespace privdiff::core
