#pragma once
/// @file
/// Evaluator: scores a labelled image set (a run's synthetic samples) against real data and
/// returns named metrics with their provenance. A component kind of its own: evaluator plugins
/// (plugins/evaluators/) are chosen by `privdiff eval --evaluator ID` or `[[eval]] evaluators`.
///
/// The host opens the real data (the test split always; the training split only when an evaluator
/// asks for it) and hands every evaluator the same input. Metric names are the evaluator's own
/// ("fid", "accuracy.resnet"): reports show them under the evaluator's id, so two evaluators'
/// "precision" (say, on Inception features and on another network's) are never mixed.

#include <privdiff/components/component.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk {

/// Images float [N, C, H, W] in [-1, 1] with int64 labels [N]; for samples drawn from prompts, each
/// one's prompt (what a text-image score such as CLIP's reads), else no prompts.
struct LabelledImages {
  at::Tensor images, labels;
  std::vector<std::string> prompts = {};  ///< empty, or one per image
  std::int64_t count() const { return images.defined() ? images.size(0) : 0; }
};

struct EvaluationInput {
  LabelledImages samples;  ///< the set scored
  /// A split of the real data: "test" (held out from training: what classifiers are tested on and,
  /// by default, what distributions are compared with) or "train". Opened once, on first use.
  std::function<const LabelledImages&(const std::string& split)> real;
  std::string real_name;                 ///< e.g. "fashion-mnist", "cifar10"
  std::string reference_split = "test";  ///< the split distribution metrics are fitted to
  std::int64_t num_classes = 0;
  std::uint64_t seed = 0;
  c10::Device device{c10::kCPU};
  std::filesystem::path cache_dir;  ///< where an evaluator may keep what it computed once per dataset
  std::ostream* log = nullptr;      ///< progress for people (never null when the host calls)
};

/// What an evaluator measured.
struct EvaluationResult {
  std::vector<std::pair<std::string, double>> metrics;  ///< in the order to show them
  /// What produced the numbers: the network, its weights, the features, the settings. Reports print
  /// it beside the metrics (e.g. "Inception-V3, pytorch-fid weights pt_inception-...pth").
  std::string provenance;
  std::map<std::string, std::int64_t> counts;  ///< images used ("samples", "reference", ...)
  /// What not to publish or how to read the numbers (e.g. "fitted to the training split").
  std::vector<std::string> caveats;
  /// Further numbers worth keeping but not tabulating (per-epoch validation accuracy, ...).
  std::vector<std::pair<std::string, double>> details;
};

class PRIVDIFF_SDK_API Evaluator : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::evaluator;
  ~Evaluator() override;
  /// Throws std::invalid_argument for input it cannot score (image size, missing weights file...),
  /// with a message that says what was expected.
  virtual EvaluationResult evaluate(const EvaluationInput& input) = 0;
  /// The metrics evaluate() reports under this configuration ("accuracy.cnn", "frechet_distance"), so
  /// that a metric can be checked before anything runs (privdiff sweep's --score, before any candidate
  /// spends). Empty (the default): they depend on the data, and are not checked.
  virtual std::vector<std::string> metric_names() const;
};

}  // namespace privdiff::sdk
