#include "run/composed_run.hpp"

#include <privdiff/components/adapter.hpp>
#include <privdiff/config/key_value_error.hpp>

#include <ATen/Context.h>

#include <stdexcept>

namespace privdiff::core {

std::unique_ptr<sdk::Model> create_model(const Recipe& recipe, const ComponentRegistry& registry) {
  auto model = create_component<sdk::Model>(registry, recipe.model->id, recipe.model->config);
  if (recipe.adapter) {
    auto adapter = create_component<sdk::Adapter>(registry, recipe.adapter->id, recipe.adapter->config);
    try {
      adapter->wrap(model->module());
    } catch (const sdk::KeyValueError& e) {  // e.g. targets that match nothing: bad input, at its key
      throw RecipeError({recipe.diagnostic(e.key_path(), e.problem())});
    } catch (const std::exception& e) {
      throw std::invalid_argument("while attaching adapter '" + recipe.adapter->id + "' ([adapter]) to model '" +
                                  recipe.model->id + "': " + e.what());
    }
  }
  return model;
}

namespace {

ComposedRun compose_components(const Recipe& recipe, const ComponentRegistry& registry) {
  // Components draw their initial weights from LibTorch's global generator: seed it from the run,
  // so the same recipe and seed give the same run.
  at::manual_seed(static_cast<std::uint64_t>(recipe.run.get_int("seed")));
  ComposedRun run;
  if (recipe.model) run.model = create_model(recipe, registry);
  for (const auto& stage : recipe.stages) {
    run.mechanisms.push_back(create_component<sdk::Mechanism>(registry, stage.mechanism.id, stage.mechanism.config));
  }
  if (recipe.sampler) {
    run.sampler = create_component<sdk::Sampler>(registry, recipe.sampler->id, recipe.sampler->config);
  }
  for (const auto& [id, config] : recipe.accountants) {
    run.accountants[id] = create_component<sdk::Accountant>(registry, id, config);
  }
  for (const auto& entry : recipe.evals) run.evaluators.push_back(create_evaluators(entry.evaluators, registry));
  return run;
}

}  // namespace

ComposedRun compose(const Recipe& recipe, const ComponentRegistry& registry) {
  try {
    return compose_components(recipe, registry);
  } catch (const sdk::KeyValueError& e) {  // a component's constructor refused a value: at its key (file:line)
    throw RecipeError({recipe.diagnostic(e.key_path(), e.problem())});
  }
}

}  // namespace privdiff::core
