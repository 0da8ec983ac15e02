#pragma once
// A sweep in `privdiff compare`: the candidates it tried (hyperparameters, noise, what each alone
// would cost, score), the one it selected, and the sweep's epsilon for the whole search. The
// candidates and their scores come from sweep.json, which the selection theorem does not cover:
// the section says so, and is for the person who ran the sweep.

#include "selection/sweep_state.hpp"

#include <filesystem>
#include <string>

namespace privdiff::core {

/// Whether `dir` is a sweep's directory (it has sweep.json).
bool is_sweep_directory(const std::filesystem::path& dir);

/// The sweep's section of compare.md.
std::string sweep_markdown(const SweepState& s, const std::filesystem::path& dir);

/// The header of compare.csv for sweeps: one row per candidate of every sweep (sweep_csv_rows).
std::string sweep_csv_header();
/// The sweep's candidates as CSV rows (sweep, candidate, parameters "k=v; ...", noise_multiplier,
/// epsilon_alone, score_metric, score, selected), numbers at full precision.
std::string sweep_csv_rows(const SweepState& s, const std::filesystem::path& dir);
/// The sweep's section as an HTML fragment (for report.html when compare is given sweeps alone).
std::string sweep_html(const SweepState& s, const std::filesystem::path& dir);

}  // namespace privdiff::core
