#pragma once
// privdiff check-mechanism on a private stage that releases noisy statistics instead of DP-SGD updates
// (semantic_query, private_evolution, a plugin's query): its own mechanism code, built anew for every
// run with reproducible noise, the recipe's model (as built, untrained: a statistic's sensitivity must
// not depend on the weights) and public data, on 23 stand-in private records of the model's image
// shape in its classes — never the recipe's private data — against extreme and typical neighbours
// (sdk check/statistic_replay.hpp).

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <privdiff/check/replay_report.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>

namespace privdiff::core {

/// The record-replay check of recipe stage `stage`; `seed` chooses the stand-in data and noise.
/// Throws UsageError (naming the recipe and stage) when the mechanism's noise cannot be made
/// reproducible (no secure_noise and seed keys).
sdk::check::Report check_statistic_stage(const Recipe& recipe, const ComponentRegistry& registry, std::size_t stage,
                                         std::uint64_t seed, std::ostream& log);

}  // namespace privdiff::core
