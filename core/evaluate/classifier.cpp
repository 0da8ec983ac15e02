#include "evaluate/classifier.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <privdiff/engine/device.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <iomanip>
#include <stdexcept>

namespace privdiff::core {

namespace nn = torch::nn;

ClassifierKind classifier_kind_from_string(const std::string& name) {
  if (name == "logreg") return ClassifierKind::logreg;
  if (name == "mlp") return ClassifierKind::mlp;
  if (name == "cnn") return ClassifierKind::cnn;
  throw std::invalid_argument("unknown classifier '" + name + "' (choose from logreg, mlp, cnn)");
}

std::string to_string(ClassifierKind kind) {
  switch (kind) {
    case ClassifierKind::logreg: return "logreg";
    case ClassifierKind::mlp: return "mlp";
    case ClassifierKind::cnn: return "cnn";
  }
  return "?";
}

ClassifierNet::ClassifierNet(ClassifierKind kind, std::int64_t classes, std::int64_t channels, std::int64_t size) {
  const std::int64_t inputs = channels * size * size;
  switch (kind) {
    case ClassifierKind::logreg:
      body_ = nn::Sequential(nn::Flatten());
      head_ = nn::Sequential(nn::Linear(inputs, classes));
      break;
    case ClassifierKind::mlp:
      body_ = nn::Sequential(nn::Flatten(), nn::Linear(inputs, 100), nn::ReLU());
      head_ = nn::Sequential(nn::Linear(100, classes));
      break;
    case ClassifierKind::cnn:
      if (size != 28) throw std::invalid_argument("the CNN classifier needs 28 x 28 images");
      body_ = nn::Sequential(nn::Conv2d(nn::Conv2dOptions(channels, 32, 3)), nn::MaxPool2d(2), nn::ReLU(),
                             nn::Dropout(0.5), nn::Conv2d(nn::Conv2dOptions(32, 64, 3)), nn::MaxPool2d(2), nn::ReLU(),
                             nn::Dropout(0.5), nn::Conv2d(nn::Conv2dOptions(64, 128, 3)), nn::ReLU(), nn::Flatten(),
                             nn::Linear(1152, 128), nn::ReLU());
      head_ = nn::Sequential(nn::Dropout(0.5), nn::Linear(128, classes));
      break;
  }
  register_module("body", body_);
  register_module("head", head_);
}

at::Tensor ClassifierNet::features(const at::Tensor& images) { return body_->forward(images); }
at::Tensor ClassifierNet::forward(const at::Tensor& images) { return head_->forward(features(images)); }

namespace {

constexpr std::int64_t eval_batch = 1000;

std::vector<at::Tensor> snapshot(ClassifierNet& net) {
  std::vector<at::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

void restore(ClassifierNet& net, const std::vector<at::Tensor>& saved) {
  torch::NoGradGuard no_grad;
  auto params = net.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(saved[i]);
}

}  // namespace

double classifier_accuracy(ClassifierNet& net, const at::Tensor& images, const at::Tensor& labels) {
  if (images.size(0) == 0) return 0;
  net.eval();
  torch::NoGradGuard no_grad;
  std::int64_t correct = 0;
  const c10::Device device = sdk::engine::module_device(net);
  for (std::int64_t i = 0; i < images.size(0); i += eval_batch) {
    const std::int64_t n = std::min(eval_batch, images.size(0) - i);
    const at::Tensor predicted = net.forward(images.narrow(0, i, n).to(device)).argmax(1).to(at::kCPU);
    correct += predicted.eq(labels.narrow(0, i, n).to(at::kCPU)).sum().item<std::int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(images.size(0));
}

at::Tensor classifier_features(ClassifierNet& net, const at::Tensor& images) {
  net.eval();
  torch::NoGradGuard no_grad;
  const c10::Device device = sdk::engine::module_device(net);
  std::vector<at::Tensor> out;
  for (std::int64_t i = 0; i < images.size(0); i += eval_batch) {
    out.push_back(net.features(images.narrow(0, i, std::min(eval_batch, images.size(0) - i)).to(device)).to(at::kCPU));
  }
  return at::cat(out, 0);
}

TrainedClassifier train_classifier(ClassifierKind kind, const at::Tensor& images, const at::Tensor& labels,
                                   std::int64_t classes, const ClassifierTraining& options, std::ostream& log) {
  const std::int64_t n = images.size(0);
  const std::int64_t validation = std::max<std::int64_t>(1, static_cast<std::int64_t>(n * options.validation_fraction));
  if (n - validation < 1) throw std::invalid_argument("too few images to train a classifier (" + std::to_string(n) + ")");
  // Weights and shuffles come from the seed alone, so the same data give the same classifier.
  at::manual_seed(options.seed);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const at::Tensor order = at::randperm(n, generator, at::kLong);
  const at::Tensor train_index = order.narrow(0, validation, n - validation);
  const at::Tensor val_index = order.narrow(0, 0, validation);
  const at::Tensor val_images = images.index_select(0, val_index), val_labels = labels.index_select(0, val_index);

  TrainedClassifier result;
  result.net = std::make_shared<ClassifierNet>(kind, classes, images.size(1), images.size(2));
  result.train_count = n - validation;
  result.validation_count = validation;
  ClassifierNet& net = *result.net;
  net.to(options.device);
  torch::optim::Adam optimizer(net.parameters(), torch::optim::AdamOptions(options.lr));
  std::vector<at::Tensor> best;
  result.validation_accuracy = -1;
  for (std::int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    net.train();
    const at::Tensor shuffled = train_index.index_select(0, at::randperm(train_index.size(0), generator, at::kLong));
    for (std::int64_t i = 0; i < shuffled.size(0); i += options.batch_size) {
      const at::Tensor batch = shuffled.narrow(0, i, std::min(options.batch_size, shuffled.size(0) - i));
      optimizer.zero_grad();
      const at::Tensor loss = at::cross_entropy_loss(net.forward(images.index_select(0, batch).to(options.device)),
                                                     labels.index_select(0, batch).to(options.device));
      loss.backward();
      optimizer.step();
    }
    const double accuracy = classifier_accuracy(net, val_images, val_labels);
    if (accuracy > result.validation_accuracy) {
      result.validation_accuracy = accuracy;
      result.best_epoch = epoch;
      best = snapshot(net);
    }
  }
  restore(net, best);
  log << "  " << to_string(kind) << ": best synthetic-validation accuracy " << std::setprecision(4)
      << result.validation_accuracy << " at epoch " << result.best_epoch << "/" << options.epochs << "\n"
      << std::flush;
  return result;
}

}  // namespace privdiff::core
