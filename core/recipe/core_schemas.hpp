#pragma once
// Schemas of the recipe sections the host itself owns ([run], [privacy], [data], [plugins]) and
// of the selector keys of component sections. Shown by `privdiff plugins show` under "recipe".

#include <privdiff/config/schema.hpp>

#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

const sdk::Schema& run_schema();
const sdk::Schema& privacy_schema();
/// [[eval]]: sample from the trained model and score the samples (privdiff eval) after training.
const sdk::Schema& eval_schema();
/// [sweep]: privdiff sweep's options (its [sweep.params] table is read apart); privdiff run ignores it.
const sdk::Schema& sweep_schema();
/// The evaluators [[eval]] and `privdiff eval` run when none are named.
const std::vector<std::string>& default_evaluators();
const sdk::Schema& plugins_schema();

/// The top-level sections a recipe may have, with the shape each must have.
struct SectionShape {
  std::string name;
  bool array_of_tables;  ///< [[stage]] rather than [model]
};
const std::vector<SectionShape>& recipe_sections();

}  // namespace privdiff::core
