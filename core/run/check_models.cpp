#include "run/check_models.hpp"

#include "data/open_dataset.hpp"
#include "run/composed_run.hpp"
#include "util/usage_error.hpp"

#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>

#include <ATen/ATen.h>

namespace privdiff::core {

std::unique_ptr<sdk::Dataset> open_public_data(const Recipe& recipe, const ComponentRegistry& registry,
                                               const std::string& name) {
  const DataSection& section = recipe.dataset(name);
  try {
    return open_dataset(section, registry);
  } catch (const UsageError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw UsageError(recipe.file + ": " + e.what());
  }
}

MechanismPublicData mechanism_public_data(const Recipe& recipe, const ComponentRegistry& registry,
                                          const StageUnderTest& stage) {
  MechanismPublicData out;
  out.name = stage.make(sdk::check::MechanismSettings{})->public_data_name();
  if (out.name) out.data = open_public_data(recipe, registry, *out.name);
  return out;
}

CheckModels check_models(const Recipe& recipe, const ComponentRegistry& registry, const StageUnderTest& stage,
                         std::uint64_t seed) {
  CheckModels out;
  MechanismPublicData found = mechanism_public_data(recipe, registry, stage);
  out.public_name = std::move(found.name);
  out.public_data = std::move(found.data);
  if (out.public_data) out.stand_in_public = std::make_unique<sdk::check::StandInPublicData>(*out.public_data);
  if (!recipe.model) return out;
  out.recipe_model.make = [&recipe, &registry, seed] {
    at::manual_seed(seed);
    std::unique_ptr<sdk::Model> model = create_model(recipe, registry);
    sdk::check::move_off_zero(*model);
    return model;
  };
  out.recipe_model.public_data = out.public_data.get();
  out.image_shape = out.recipe_model.make()->image_shape();
  return out;
}

}  // namespace privdiff::core
