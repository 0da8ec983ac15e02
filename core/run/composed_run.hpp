#pragma once
// The components a recipe names, constructed from their validated configs.

#include "evaluate/evaluation.hpp"
#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/components/sampler.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::core {

struct ComposedRun {
  std::unique_ptr<sdk::Model> model;                          ///< null when the recipe has no [model]
  std::vector<std::unique_ptr<sdk::Mechanism>> mechanisms;    ///< one per [[stage]], in order
  std::unique_ptr<sdk::Sampler> sampler;                      ///< null when the recipe has no [sampler]
  std::map<std::string, std::unique_ptr<sdk::Accountant>> accountants;  ///< every accountant the recipe names
  std::vector<std::vector<NamedEvaluator>> evaluators;  ///< per [[eval]] entry
};

/// The recipe's [model] with its [adapter] (if any) grafted on, its initial weights drawn from
/// LibTorch's global generator; errors name the component, its plugin and the recipe section. Every
/// command that builds a model builds it here, so a run's adapter is there when its weights load.
std::unique_ptr<sdk::Model> create_model(const Recipe& recipe, const ComponentRegistry& registry);

/// Constructs every component (after seeding LibTorch's global generator with [run] seed, which
/// model initialisation draws from); errors name the component, its plugin and the recipe section.
ComposedRun compose(const Recipe& recipe, const ComponentRegistry& registry);

}  // namespace privdiff::core
