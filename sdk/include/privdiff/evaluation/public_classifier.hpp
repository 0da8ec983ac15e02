#pragma once
/// @file
/// A classifier trained on public data alone, for mechanisms that look at private images through
/// public eyes: PrivImage's semantic query labels them with its public classes, Private Evolution
/// compares them with synthetic images in its output space. A ResNet (benchmark_classifiers.hpp)
/// trained on 9 in 10 of the public records, the tenth selecting the epoch, seeded from public
/// configuration: nothing private reaches its weights.

#include <privdiff/components/dataset.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/evaluation/benchmark_classifiers.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

namespace privdiff::sdk::evaluation {

struct PublicClassifierOptions {
  std::int64_t depth = 8;  ///< ResNet depth, 6n + 2
  std::int64_t epochs = 3;
  std::int64_t batch_size = 128;
  double lr = 1e-3;  ///< Adam
};

/// The recipe keys classifier_depth, classifier_epochs, classifier_batch_size and classifier_lr, added to
/// a mechanism's schema; `role` says what the classifier is for ("the embedding", ...).
PRIVDIFF_SDK_API Schema& add_public_classifier_keys(Schema& schema, const std::string& role);
/// Those keys read back; throws std::invalid_argument naming the key when the depth is not 6n + 2.
PRIVDIFF_SDK_API PublicClassifierOptions public_classifier_options(const Config& config);

class PRIVDIFF_SDK_API PublicClassifier {
 public:
  /// Trains on `public_data` (`public_labels`: all its labels, in order), logging to `log` under `who`.
  PublicClassifier(const Dataset& public_data, const at::Tensor& public_labels, const PublicClassifierOptions& options,
                   std::uint64_t seed, std::ostream& log, const std::string& who);
  /// Logits [N, public classes] (double, CPU) of `images` [N, C, H, W] in [-1, 1], in batches of 500.
  at::Tensor logits(const at::Tensor& images) const;
  double validation_accuracy() const { return validation_accuracy_; }

 private:
  std::shared_ptr<ImageClassifier> net_;
  double validation_accuracy_ = 0;
};

}  // namespace privdiff::sdk::evaluation
