#pragma once
// privdiff sweep's orchestration (Papernot & Steinke 2022): K candidates, K drawn at random, each a full
// run of the recipe with drawn hyperparameters and its noise calibrated so that the selection of the best
// meets the recipe's [privacy] target; only the best is released, through the release gate
// (release/sweep_statement.hpp). The command line parses into a SweepRequest and prints the result.

#include "selection/sweep_state.hpp"

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace privdiff::core {

/// What the user asked for: a new sweep (recipe, search, count) or --resume DIR.
struct SweepRequest {
  std::string recipe, out, resume, score, candidates = "truncated_negative_binomial";
  std::vector<std::string> params, overrides;
  double eta = 1, gamma = 0.25, mu = 4;
  std::int64_t count = 4, seed = 0, stop_after = -1;  ///< stop_after -1: run them all
  bool minimize = false, seeded = false;
  std::set<std::string> given;  ///< the options given on the command line: they win over the recipe's [sweep]
  /// The count's options set by the user (command line or [sweep] table), as "--mu": one that the chosen
  /// --candidates does not use is refused, not ignored.
  std::set<std::string> set_count_options;
};

/// The sweep as it stands after run_sweep: stopped (on request, or after `stop_after` candidates) or
/// released (state.released; the candidates' directories deleted).
struct SweepResult {
  std::filesystem::path dir;
  SweepState state;
  bool stopped = false;
  std::int64_t ran = 0;  ///< candidates run by this call
};

/// What `privdiff validate` checks of a recipe's [sweep] table (with the command line's --set): all that
/// `privdiff sweep` checks before it draws K — the searched keys and every value they can take, the score,
/// the count, the per-candidate budget (printed to `log`). Throws UsageError or RecipeError.
void check_recipe_sweep(const std::string& recipe, const std::vector<std::string>& overrides,
                        const std::vector<std::string>& plugin_paths, std::ostream& log);

/// Plans a new sweep (or reads a resumed one's state, refusing a recipe changed since its plan), runs the
/// candidates not done yet, and releases the best. Progress goes to `log`. Throws UsageError for input the
/// user can fix and for a release the gate refuses.
SweepResult run_sweep(const SweepRequest& request, const std::vector<std::string>& plugin_paths, std::ostream& log);

}  // namespace privdiff::core
