#pragma once
// What a finished sweep releases: the selected candidate's model (with the sweep's guarantee in its
// metadata and model card), samples and evaluation, in DIR/selected, and DIR/privacy.json; every
// candidate's run directory is then deleted. Nothing else the sweep did may be published.

#include "util/usage_error.hpp"
#include "selection/sweep_state.hpp"

#include <filesystem>
#include <ostream>

namespace privdiff::core {

/// The candidate's score: `metric` from its run directory's eval-N.json files (the first that has
/// it). Throws UsageError naming the metrics there are when none has it.
double candidate_score(const std::filesystem::path& run_dir, const std::string& metric);

/// Selects, releases and cleans up (state.released, state.selected set; written by the caller).
void release_sweep(SweepState& state, const std::filesystem::path& dir, const std::vector<std::string>& plugin_paths, std::ostream& log);

}  // namespace privdiff::core
