#pragma once
// The downstream classifiers of DPDM's evaluation (from the DP-Sinkhorn code): logistic regression
// (784 -> 10), an MLP (784 -> 100 -> 10) and a small CNN (conv32-pool-ReLU-drop0.5,
// conv64-pool-ReLU-drop0.5, conv128-ReLU, FC 1152 -> 128, drop0.5, FC 10; 3x3 kernels, no padding).
// The CNN's penultimate 128 features are also the feature_cnn evaluator's features.

#include <privdiff/evaluation/classifier_training.hpp>

#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>

namespace privdiff::plugins::dpdm_evaluation {

enum class DpdmClassifier { logreg, mlp, cnn };
DpdmClassifier dpdm_classifier_from_string(const std::string& name);  ///< throws std::invalid_argument
std::string to_string(DpdmClassifier kind);

class DpdmClassifierNet : public sdk::evaluation::ImageClassifier {
 public:
  /// Images [N, C, H, W] (the CNN: at least 16 x 16; DPDM's is 28 x 28).
  DpdmClassifierNet(DpdmClassifier kind, std::int64_t classes, std::int64_t channels, std::int64_t size);
  at::Tensor forward(const at::Tensor& images) override;
  /// The penultimate representation (CNN: the 128 ReLU features; MLP: 100; logreg: the pixels).
  at::Tensor features(const at::Tensor& images);

 private:
  torch::nn::Sequential body_{nullptr}, head_{nullptr};
};

/// Penultimate features of many images, in batches, eval mode, on the net's device: [N, F] float on the CPU.
at::Tensor penultimate_features(DpdmClassifierNet& net, const at::Tensor& images);

/// DPDM's training settings: Adam 3e-4, batch 128, constant learning rate.
sdk::evaluation::ClassifierSchedule dpdm_schedule(std::int64_t epochs);

}  // namespace privdiff::plugins::dpdm_evaluation
