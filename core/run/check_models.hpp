#pragma once
// The models and public data the DP-SGD checks of `privdiff check-mechanism` run a recipe's stage
// with: besides the SDK's stand-in (a tiny conv, group-norm and linear denoiser on 1x4x4 records),
// the recipe's own model (its adapter grafted on, every tensor kind it has: attention, embeddings,
// norms, adapters; every parameter trains in the checks), and the public dataset the
// mechanism names (Mechanism::public_data_name), as is for the recipe's model and reduced to 1x4x4
// records for the stand-in.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"
#include "run/stage_under_test.hpp"

#include <privdiff/check/replay_models.hpp>
#include <privdiff/components/dataset.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

/// The public dataset a stage's mechanism names (Mechanism::public_data_name), opened.
struct MechanismPublicData {
  std::optional<std::string> name;      ///< the mechanism's [data.NAME], if any
  std::unique_ptr<sdk::Dataset> data;   ///< it, opened (null: none)
};

/// The public data `mechanism` reads (Mechanism::public_data_name), opened and, when it is public,
/// passed through its check_public_data (null when it names none). A dataset that cannot be opened is bad input:
/// UsageError naming the recipe file and the dataset's section; a key the data cannot serve, a
/// RecipeError at its place.
std::unique_ptr<sdk::Dataset> open_public_data(const Recipe& recipe, const ComponentRegistry& registry,
                                               const sdk::Mechanism& mechanism);

/// The public data of `stage`'s mechanism (built once with the check's settings to ask). Throws
/// UsageError when the recipe has no such dataset or it cannot be opened.
MechanismPublicData mechanism_public_data(const Recipe& recipe, const ComponentRegistry& registry,
                                          const StageUnderTest& stage);

struct CheckModels {
  std::optional<std::string> public_name;                         ///< the mechanism's [data.NAME], if any
  std::unique_ptr<sdk::Dataset> public_data;                      ///< it, opened (null: none)
  std::unique_ptr<sdk::check::StandInPublicData> stand_in_public;  ///< it as the stand-in's records
  /// The recipe's model, built afresh for each run with the same weights (LibTorch's global generator
  /// seeded first; parameters that start at zero, LoRA's B or a zero-initialised output projection,
  /// drawn small, so that the layers before them have gradients to check); its public_data is the
  /// above. make is unset when the recipe has no [model].
  sdk::check::ModelSpec recipe_model;
  std::vector<std::int64_t> image_shape;  ///< a record of the recipe's model, [C, H, W]
  /// The recipe's model conditions on text: its records are an image and its caption, and the checks
  /// on it caption them (check::typical_captions, check::captioned_neighbours).
  bool text = false;
};

/// The recipe's model and public data for checking `stage`; `seed` sets the model's weights. Valid
/// while `recipe` and `registry` are. Throws UsageError when the public data cannot be opened.
CheckModels check_models(const Recipe& recipe, const ComponentRegistry& registry, const StageUnderTest& stage,
                         std::uint64_t seed);

}  // namespace privdiff::core
