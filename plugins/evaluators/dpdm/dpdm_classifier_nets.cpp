#include "dpdm_classifier_nets.hpp"

#include <privdiff/engine/device.hpp>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/types.h>

#include <stdexcept>
#include <vector>

namespace privdiff::plugins::dpdm_evaluation {

namespace nn = torch::nn;

DpdmClassifier dpdm_classifier_from_string(const std::string& name) {
  if (name == "logreg") return DpdmClassifier::logreg;
  if (name == "mlp") return DpdmClassifier::mlp;
  if (name == "cnn") return DpdmClassifier::cnn;
  throw std::invalid_argument("unknown classifier '" + name + "' (choose from logreg, mlp, cnn)");
}

std::string to_string(DpdmClassifier kind) {
  switch (kind) {
    case DpdmClassifier::logreg: return "logreg";
    case DpdmClassifier::mlp: return "mlp";
    case DpdmClassifier::cnn: return "cnn";
  }
  return "?";
}

DpdmClassifierNet::DpdmClassifierNet(DpdmClassifier kind, std::int64_t classes, std::int64_t channels,
                                     std::int64_t size) {
  const std::int64_t inputs = channels * size * size;
  switch (kind) {
    case DpdmClassifier::logreg:
      body_ = nn::Sequential(nn::Flatten());
      head_ = nn::Sequential(nn::Linear(inputs, classes));
      break;
    case DpdmClassifier::mlp:
      body_ = nn::Sequential(nn::Flatten(), nn::Linear(inputs, 100), nn::ReLU());
      head_ = nn::Sequential(nn::Linear(100, classes));
      break;
    case DpdmClassifier::cnn: {
      // 28 x 28 (DPDM's): 26 -> 13 -> 11 -> 5 -> 3, so 128 x 3 x 3 = 1152 features; other sizes
      // (CIFAR-10's 32: 128 x 4 x 4) size the first linear layer the same way.
      const std::int64_t side = ((size - 2) / 2 - 2) / 2 - 2;
      if (side < 1) throw std::invalid_argument("DPDM's CNN needs images of at least 16 x 16, these are " + std::to_string(size));
      body_ = nn::Sequential(nn::Conv2d(nn::Conv2dOptions(channels, 32, 3)), nn::MaxPool2d(2), nn::ReLU(),
                             nn::Dropout(0.5), nn::Conv2d(nn::Conv2dOptions(32, 64, 3)), nn::MaxPool2d(2), nn::ReLU(),
                             nn::Dropout(0.5), nn::Conv2d(nn::Conv2dOptions(64, 128, 3)), nn::ReLU(), nn::Flatten(),
                             nn::Linear(128 * side * side, 128), nn::ReLU());
      head_ = nn::Sequential(nn::Dropout(0.5), nn::Linear(128, classes));
      break;
    }
  }
  register_module("body", body_);
  register_module("head", head_);
}

at::Tensor DpdmClassifierNet::features(const at::Tensor& images) { return body_->forward(images); }
at::Tensor DpdmClassifierNet::forward(const at::Tensor& images) { return head_->forward(features(images)); }

at::Tensor penultimate_features(DpdmClassifierNet& net, const at::Tensor& images) {
  constexpr std::int64_t batch = 1000;
  net.eval();
  torch::NoGradGuard no_grad;
  const c10::Device device = sdk::engine::module_device(net);
  std::vector<at::Tensor> out;
  for (std::int64_t i = 0; i < images.size(0); i += batch) {
    out.push_back(net.features(images.narrow(0, i, std::min(batch, images.size(0) - i)).to(device)).to(at::kCPU));
  }
  return at::cat(out, 0);
}

sdk::evaluation::ClassifierSchedule dpdm_schedule(std::int64_t epochs) {
  sdk::evaluation::ClassifierSchedule schedule;
  schedule.epochs = epochs;
  schedule.batch_size = 128;
  schedule.optimizer = sdk::evaluation::ClassifierSchedule::Optimizer::adam;
  schedule.lr = 3e-4;
  return schedule;
}

}  // namespace privdiff::plugins::dpdm_evaluation
