#pragma once
// secure_noise = false: a stage's noise is then a function of its seed, and the run it belongs to
// the same run bit for bit from the same recipe (docs/engine.md).

#include "recipe/recipe.hpp"

namespace privdiff::core {

inline bool draws_reproducible_noise(const StageSection& stage) {
  const sdk::Config& config = stage.mechanism.config;
  return config.has("secure_noise") && !config.get_bool("secure_noise");
}

/// Whether any of the recipe's stages does.
inline bool draws_reproducible_noise(const Recipe& recipe) {
  for (const auto& stage : recipe.stages) {
    if (draws_reproducible_noise(stage)) return true;
  }
  return false;
}

}  // namespace privdiff::core
