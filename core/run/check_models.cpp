#include "run/check_models.hpp"

#include "data/open_dataset.hpp"
#include "run/composed_run.hpp"
#include "recipe/diagnostic.hpp"
#include "util/usage_error.hpp"

#include <privdiff/components/mechanism.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/components/model.hpp>

#include <ATen/ATen.h>

namespace privdiff::core {

std::unique_ptr<sdk::Dataset> open_public_data(const Recipe& recipe, const ComponentRegistry& registry,
                                               const sdk::Mechanism& mechanism) {
  const auto name = mechanism.public_data_name();
  if (!name) return nullptr;
  std::unique_ptr<sdk::Dataset> data;
  try {
    data = open_dataset(recipe.dataset(*name), registry);
    // Only data that is public: the hook's refusals describe the data (its classes, their records).
    if (data->is_public()) mechanism.check_public_data(*data);
  } catch (const UsageError&) {
    throw;
  } catch (const sdk::KeyValueError& e) {
    throw RecipeError({recipe.diagnostic(e.key_path(), e.problem())});
  } catch (const std::runtime_error& e) {
    throw UsageError(recipe.file + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw UsageError(recipe.file + ": public data '" + *name + "': " + e.what());
  }
  return data;
}

MechanismPublicData mechanism_public_data(const Recipe& recipe, const ComponentRegistry& registry,
                                          const StageUnderTest& stage) {
  MechanismPublicData out;
  const auto mechanism = stage.make(sdk::check::MechanismSettings{});
  out.name = mechanism->public_data_name();
  out.data = open_public_data(recipe, registry, *mechanism);
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
  const std::unique_ptr<sdk::Model> model = out.recipe_model.make();
  out.image_shape = model->image_shape();
  out.text = model->conditions_on_text();
  return out;
}

}  // namespace privdiff::core
