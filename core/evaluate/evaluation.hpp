#pragma once
// `privdiff eval`: scores a labelled image set (synthetic, or a real one as a reference) by
//  - downstream accuracy: classifiers trained on the set (90/10 train/validation split of the set,
//    best validation epoch kept) and tested on the real test set;
//  - Fréchet distance and k-NN precision/recall on the penultimate features of a CNN trained once
//    on a real *reference* split (deterministic, cached by content hash), against that split.
//
// The reference is the test split by default: data disjoint from what a private model trained on,
// so the scores are no statistics of private records. The floor is then the distance between the
// even and odd halves of the test split. reference = "train" (the larger set, as DPDM's numbers
// use) fits everything to the training split, with the real-test vs real-train distance as the
// floor — non-private statistics of that split, flagged by a caveat in the result.

#include "evaluate/classifier.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

struct EvalOptions {
  std::vector<ClassifierKind> classifiers{ClassifierKind::logreg, ClassifierKind::mlp, ClassifierKind::cnn};
  std::int64_t epochs = 50;            ///< per downstream classifier
  std::int64_t max_samples = 60000;    ///< at most this many images of the set are used
  std::string real_dataset = "fashion-mnist";
  std::string real_path;               ///< directory of the real IDX files (default: the dataset's)
  std::string reference = "test";      ///< the split the feature CNN, Fréchet and precision/recall use
  std::int64_t feature_epochs = 5;     ///< feature CNN training (part of its cache key)
  std::int64_t pr_samples = 10000;     ///< per set, for precision/recall (quadratic cost)
  std::uint64_t seed = 0;
  c10::Device device{c10::kCPU};       ///< where classifiers and the feature network run
  std::filesystem::path cache_dir;     ///< empty: $PRIVDIFF_CACHE_DIR, $XDG_CACHE_HOME/privdiff, ~/.cache/privdiff
};

/// Reads an IDX image/label pair and checks it (same count, labels within the classes). Images as
/// float [-1, 1] [N, C, H, W]. Throws std::runtime_error naming the file and the problem.
struct LabelledImages {
  at::Tensor images;
  at::Tensor labels;
};
LabelledImages read_labelled_images(const std::filesystem::path& images_file, const std::filesystem::path& labels_file,
                                    std::int64_t classes);

/// The caveat of a result scored against the training split.
const std::string& train_reference_caveat();

/// Everything `--json` prints ("reference" says which split; "caveats" lists what not to publish).
/// Throws std::invalid_argument when the real data cannot be opened (bad --real / --real-path).
nlohmann::json evaluate_image_set(const LabelledImages& set, const EvalOptions& options, std::ostream& log);

}  // namespace privdiff::core
