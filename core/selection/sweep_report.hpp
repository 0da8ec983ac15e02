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

}  // namespace privdiff::core
