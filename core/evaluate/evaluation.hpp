#pragma once
// `privdiff eval` and [[eval]]: scores a labelled image set (synthetic, or a real one as a check)
// with evaluator plugins against a real dataset opened through its dataset plugin.
//
// Every evaluator gets the same input: the set, the real test split (classifiers are tested on
// it) and the reference split distribution metrics are fitted to — the test split by default,
// data disjoint from what a private model trained on, so the scores are no statistics of private
// records. reference = "train" fits them to the training split instead (as published FIDs are):
// non-private statistics of that split, flagged by a caveat in the result.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <privdiff/components/dataset.hpp>
#include <privdiff/components/evaluator.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

/// An evaluator plugin's component, with the id it was created as.
struct NamedEvaluator {
  std::string id;
  std::unique_ptr<sdk::Evaluator> evaluator;
};

/// Creates the evaluators of validated sections (recipe_validator.hpp): errors name the plugin.
std::vector<NamedEvaluator> create_evaluators(const std::vector<ComponentSection>& sections,
                                              const ComponentRegistry& registry);

/// Opens a dataset section (open_dataset with the registry, or a test's stand-in).
using RealDataOpener = std::function<std::unique_ptr<sdk::Dataset>(const DataSection& data)>;

struct EvaluationPlan {
  DataSection real;                  ///< the real dataset; its `split` is set to "test" / "train" as needed
  std::string reference = "test";    ///< "test" or "train"
  std::int64_t max_samples = 0;      ///< 0: all of the set; N: N of it, spread over the classes
  std::uint64_t seed = 0;
  c10::Device device{c10::kCPU};     ///< where classifiers and feature networks run
  std::filesystem::path cache_dir;   ///< empty: $PRIVDIFF_CACHE_DIR, $XDG_CACHE_HOME/privdiff, ~/.cache/privdiff
  /// Called when a split is opened, before an evaluator reads it; may refuse it by throwing
  /// std::invalid_argument (e.g. a split holding the private records of the run being scored).
  std::function<void(const std::string& split, const sdk::Dataset& data)> check_split;
};

/// `real` with its `split` key set to `split`: the section one split of the real data opens with.
DataSection split_section(const DataSection& real, const std::string& split);

/// Reads an IDX image/label pair and checks it (same count, labels within the classes). Images as
/// float [-1, 1] [N, C, H, W]. Throws std::runtime_error naming the file and the problem.
sdk::LabelledImages read_labelled_images(const std::filesystem::path& images_file,
                                         const std::filesystem::path& labels_file, std::int64_t classes);

/// The caveat of a result scored against the training split.
const std::string& train_reference_caveat();

/// Runs every evaluator of the plan. The JSON (`--json`, eval.json) holds "real", "reference",
/// "counts", "caveats" and "evaluators": {ID: {"metrics", "provenance", "counts", "caveats",
/// "details", "seconds"}}. Throws std::invalid_argument for data that cannot be scored (unknown
/// real data, another image size, labels outside the real classes), naming what was expected.
nlohmann::json evaluate_image_set(const sdk::LabelledImages& set, const EvaluationPlan& plan,
                                  const std::vector<NamedEvaluator>& evaluators, const RealDataOpener& open,
                                  std::ostream& log);

}  // namespace privdiff::core
