#include "run/composed_run.hpp"

#include <ATen/Context.h>

namespace privdiff::core {

ComposedRun compose(const Recipe& recipe, const ComponentRegistry& registry) {
  // Components draw their initial weights from LibTorch's global generator: seed it from the run,
  // so the same recipe and seed give the same run.
  at::manual_seed(static_cast<std::uint64_t>(recipe.run.get_int("seed")));
  ComposedRun run;
  if (recipe.model) run.model = create_component<sdk::Model>(registry, recipe.model->id, recipe.model->config);
  for (const auto& stage : recipe.stages) {
    run.mechanisms.push_back(create_component<sdk::Mechanism>(registry, stage.mechanism.id, stage.mechanism.config));
  }
  if (recipe.sampler) {
    run.sampler = create_component<sdk::Sampler>(registry, recipe.sampler->id, recipe.sampler->config);
  }
  for (const auto& [id, config] : recipe.accountants) {
    run.accountants[id] = create_component<sdk::Accountant>(registry, id, config);
  }
  return run;
}

}  // namespace privdiff::core
