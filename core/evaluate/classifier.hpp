#pragma once
// The downstream classifiers of DPDM's evaluation (from the DP-Sinkhorn code): logistic regression
// (784 -> 10), an MLP (784 -> 100 -> 10) and a small CNN (conv32-pool-ReLU-drop0.5,
// conv64-pool-ReLU-drop0.5, conv128-ReLU, FC 1152 -> 128, drop0.5, FC 10; 3x3 kernels, no padding),
// trained with Adam 3e-4, batch 128, keeping the epoch with the best accuracy on a held-out 10% of
// the *training* (synthetic) set. The real test set is only ever scored, never selected on.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

namespace privdiff::core {

enum class ClassifierKind { logreg, mlp, cnn };
ClassifierKind classifier_kind_from_string(const std::string& name);  ///< throws std::invalid_argument
std::string to_string(ClassifierKind kind);

class ClassifierNet : public torch::nn::Module {
 public:
  /// Images [N, C, H, W]; the CNN needs 28 x 28 (its 1152 = 128 x 3 x 3 features).
  ClassifierNet(ClassifierKind kind, std::int64_t classes, std::int64_t channels, std::int64_t size);
  at::Tensor forward(const at::Tensor& images);
  /// The penultimate representation (CNN: the 128 ReLU features; MLP: 100; logreg: the pixels).
  at::Tensor features(const at::Tensor& images);

 private:
  torch::nn::Sequential body_{nullptr}, head_{nullptr};
};

struct ClassifierTraining {
  std::int64_t epochs = 50;
  std::int64_t batch_size = 128;
  double lr = 3e-4;
  double validation_fraction = 0.1;
  std::uint64_t seed = 0;
  c10::Device device{c10::kCPU};  ///< where it trains (weights are initialised on the CPU: same on every device)
};

struct TrainedClassifier {
  std::shared_ptr<ClassifierNet> net;
  double validation_accuracy = 0;
  std::int64_t best_epoch = 0;
  std::int64_t train_count = 0, validation_count = 0;
};

/// Images as float in [-1, 1], [N, C, H, W]; labels int64 [N]. Deterministic for a seed.
TrainedClassifier train_classifier(ClassifierKind kind, const at::Tensor& images, const at::Tensor& labels,
                                   std::int64_t classes, const ClassifierTraining& options, std::ostream& log);

/// Top-1 accuracy in [0, 1].
double classifier_accuracy(ClassifierNet& net, const at::Tensor& images, const at::Tensor& labels);

/// Penultimate features of many images, in batches, eval mode: [N, F] float.
at::Tensor classifier_features(ClassifierNet& net, const at::Tensor& images);

}  // namespace privdiff::core
