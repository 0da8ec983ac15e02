#include <privdiff/evaluation/benchmark_classifiers.hpp>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

// Module and parameter order follow the Python classes (attribute order), so parameters() lines up
// with DPImageBench's model.parameters(): the test fixture compares the shapes in order.
namespace privdiff::sdk::evaluation {

namespace {

namespace nn = torch::nn;

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                std::int64_t groups = 1) {
  nn::Conv2d c(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).groups(groups).bias(false));
  // All three Python files draw convolutions from N(0, 2 / (out_channels * k * k)) (He, fan-out).
  torch::NoGradGuard no_grad;
  const double fan_out = static_cast<double>(out * kernel * kernel);
  c->weight.normal_(0, std::sqrt(2.0 / fan_out));
  return c;
}

nn::BatchNorm2d batch_norm(std::int64_t channels) { return nn::BatchNorm2d(nn::BatchNorm2dOptions(channels)); }

// ---- ResNet (evaluation/classifier/resnet.py, BasicBlock)

struct ResNetBlock : nn::Module {
  ResNetBlock(std::int64_t in, std::int64_t planes, std::int64_t stride)
      : conv1(register_module("conv1", conv(in, planes, 3, stride, 1))),
        bn1(register_module("bn1", batch_norm(planes))),
        conv2(register_module("conv2", conv(planes, planes, 3, 1, 1))),
        bn2(register_module("bn2", batch_norm(planes))) {
    if (stride != 1 || in != planes) {
      downsample = register_module("downsample", nn::Sequential(conv(in, planes, 1, stride, 0), batch_norm(planes)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor out = bn2->forward(conv2->forward(at::relu(bn1->forward(conv1->forward(x)))));
    return at::relu(out + (downsample ? downsample->forward(x) : x));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample{nullptr};
};

class ResNet : public ImageClassifier {
 public:
  ResNet(const BenchmarkArchitecture& a, std::int64_t channels, std::int64_t image_size, std::int64_t classes)
      : pool_(image_size / 4) {
    const std::int64_t blocks = (a.depth - 2) / 6;
    conv1_ = register_module("conv1", conv(channels, 16, 3, 1, 1));
    bn1_ = register_module("bn1", batch_norm(16));
    const std::int64_t widths[] = {16, 16, 32, 64};
    for (int s = 0; s < 3; ++s) {
      nn::ModuleList stage;
      for (std::int64_t b = 0; b < blocks; ++b) {
        blocks_.push_back(std::make_shared<ResNetBlock>(b == 0 ? widths[s] : widths[s + 1], widths[s + 1],
                                                        b == 0 && s > 0 ? 2 : 1));
        stage->push_back(blocks_.back());
      }
      register_module("layer" + std::to_string(s + 1), stage);
    }
    fc_ = register_module("fc", nn::Linear(64, classes));  // torch's default Linear initialisation
  }
  at::Tensor forward(const at::Tensor& images) override {
    at::Tensor x = at::relu(bn1_->forward(conv1_->forward(images)));
    for (const auto& block : blocks_) x = block->forward(x);
    x = at::avg_pool2d(x, {pool_, pool_});  // nn.AvgPool2d(image_size // 4): stride = kernel
    return fc_->forward(x.flatten(1));
  }

 private:
  std::int64_t pool_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<ResNetBlock>> blocks_;
  nn::Linear fc_{nullptr};
};

// ---- Wide ResNet (evaluation/classifier/wrn.py): pre-activation blocks, dropout between the convs

struct WideBlock : nn::Module {
  WideBlock(std::int64_t in, std::int64_t out, std::int64_t stride, double dropout)
      : bn1(register_module("bn1", batch_norm(in))),
        conv1(register_module("conv1", conv(in, out, 3, stride, 1))),
        bn2(register_module("bn2", batch_norm(out))),
        conv2(register_module("conv2", conv(out, out, 3, 1, 1))),
        dropout(dropout) {
    if (in != out) shortcut = register_module("convShortcut", conv(in, out, 1, stride, 0));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor activated = at::relu(bn1->forward(x));
    at::Tensor out = at::relu(bn2->forward(conv1->forward(activated)));
    if (dropout > 0) out = at::dropout(out, dropout, is_training());
    out = conv2->forward(out);
    // A widening block's shortcut convolves the activated input; an identity one adds the raw input.
    return (shortcut ? shortcut->forward(activated) : x) + out;
  }
  nn::BatchNorm2d bn1;
  nn::Conv2d conv1;
  nn::BatchNorm2d bn2;
  nn::Conv2d conv2;
  nn::Conv2d shortcut{nullptr};
  double dropout;
};

class WideResNet : public ImageClassifier {
 public:
  WideResNet(const BenchmarkArchitecture& a, std::int64_t channels, std::int64_t image_size, std::int64_t classes)
      : pool_(image_size / 4) {
    const std::int64_t blocks = (a.depth - 4) / 6;
    const std::int64_t widths[] = {16, 16 * a.widen_factor, 32 * a.widen_factor, 64 * a.widen_factor};
    conv1_ = register_module("conv1", conv(channels, 16, 3, 1, 1));
    for (int g = 0; g < 3; ++g) {
      nn::ModuleList group;
      for (std::int64_t b = 0; b < blocks; ++b) {
        blocks_.push_back(std::make_shared<WideBlock>(b == 0 ? widths[g] : widths[g + 1], widths[g + 1],
                                                      b == 0 && g > 0 ? 2 : 1, a.dropout));
        group->push_back(blocks_.back());
      }
      register_module("block" + std::to_string(g + 1), group);
    }
    bn1_ = register_module("bn1", batch_norm(widths[3]));
    fc_ = register_module("fc", nn::Linear(widths[3], classes));
    torch::NoGradGuard no_grad;
    fc_->bias.zero_();  // wrn.py zeroes Linear biases; the weight keeps torch's default
  }
  at::Tensor forward(const at::Tensor& images) override {
    at::Tensor x = conv1_->forward(images);
    for (const auto& block : blocks_) x = block->forward(x);
    x = at::avg_pool2d(at::relu(bn1_->forward(x)), {pool_, pool_});
    return fc_->forward(x.flatten(1));
  }

 private:
  std::int64_t pool_;
  nn::Conv2d conv1_{nullptr};
  std::vector<std::shared_ptr<WideBlock>> blocks_;
  nn::BatchNorm2d bn1_{nullptr};
  nn::Linear fc_{nullptr};
};

// ---- ResNeXt (evaluation/classifier/resnext.py): bottlenecks D = cardinality * out / widen wide

struct ResNeXtBottleneck : nn::Module {
  ResNeXtBottleneck(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t cardinality,
                    std::int64_t widen)
      : inner(cardinality * out / widen),
        conv_reduce(register_module("conv_reduce", conv(in, inner, 1, 1, 0))),
        bn_reduce(register_module("bn_reduce", batch_norm(inner))),
        conv_conv(register_module("conv_conv", conv(inner, inner, 3, stride, 1, cardinality))),
        bn(register_module("bn", batch_norm(inner))),
        conv_expand(register_module("conv_expand", conv(inner, out, 1, 1, 0))),
        bn_expand(register_module("bn_expand", batch_norm(out))) {
    if (in != out) {
      shortcut = register_module("shortcut", nn::Sequential(conv(in, out, 1, stride, 0), batch_norm(out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor b = at::relu(bn_reduce->forward(conv_reduce->forward(x)));
    b = at::relu(bn->forward(conv_conv->forward(b)));
    b = bn_expand->forward(conv_expand->forward(b));
    return at::relu((shortcut ? shortcut->forward(x) : x) + b);
  }
  std::int64_t inner;
  nn::Conv2d conv_reduce;
  nn::BatchNorm2d bn_reduce;
  nn::Conv2d conv_conv;
  nn::BatchNorm2d bn;
  nn::Conv2d conv_expand;
  nn::BatchNorm2d bn_expand;
  nn::Sequential shortcut{nullptr};
};

class ResNeXt : public ImageClassifier {
 public:
  ResNeXt(const BenchmarkArchitecture& a, std::int64_t channels, std::int64_t image_size, std::int64_t classes)
      : pool_(image_size / 4) {
    const std::int64_t blocks = (a.depth - 2) / 9;
    const std::int64_t widths[] = {64, 64 * a.widen_factor, 128 * a.widen_factor, 256 * a.widen_factor};
    stem_ = register_module("conv_1_3x3", conv(channels, 64, 3, 1, 1));
    stem_bn_ = register_module("bn_1", batch_norm(64));
    for (int s = 0; s < 3; ++s) {
      nn::ModuleList stage;
      for (std::int64_t b = 0; b < blocks; ++b) {
        blocks_.push_back(std::make_shared<ResNeXtBottleneck>(b == 0 ? widths[s] : widths[s + 1], widths[s + 1],
                                                              b == 0 && s > 0 ? 2 : 1, a.cardinality,
                                                              a.widen_factor));
        stage->push_back(blocks_.back());
      }
      register_module("stage_" + std::to_string(s + 1), stage);
    }
    classifier_ = register_module("classifier", nn::Linear(widths[3], classes));
    // resnext.py: the classifier's weight He-normal (fan-in), every bias zero.
    torch::NoGradGuard no_grad;
    classifier_->weight.normal_(0, std::sqrt(2.0 / static_cast<double>(widths[3])));
    classifier_->bias.zero_();
  }
  at::Tensor forward(const at::Tensor& images) override {
    at::Tensor x = at::relu(stem_bn_->forward(stem_->forward(images)));
    for (const auto& block : blocks_) x = block->forward(x);
    x = at::avg_pool2d(x, {pool_, pool_}, {1, 1});  // F.avg_pool2d(x, image_size // 4, 1)
    return classifier_->forward(x.flatten(1));
  }

 private:
  std::int64_t pool_;
  nn::Conv2d stem_{nullptr};
  nn::BatchNorm2d stem_bn_{nullptr};
  std::vector<std::shared_ptr<ResNeXtBottleneck>> blocks_;
  nn::Linear classifier_{nullptr};
};

void check_architecture(const BenchmarkArchitecture& a) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument(describe(a) + ": " + what); };
  switch (a.network) {
    case BenchmarkNetwork::resnet:
      if (a.depth < 8 || (a.depth - 2) % 6 != 0) fail("ResNet depth must be 6n + 2 with n >= 1 (8, 20, 110, 164)");
      break;
    case BenchmarkNetwork::wrn:
      if (a.depth < 10 || (a.depth - 4) % 6 != 0) fail("WRN depth must be 6n + 4 with n >= 1 (10, 28, 40)");
      break;
    case BenchmarkNetwork::resnext:
      if (a.depth < 11) fail("ResNeXt depth must be at least 11 (one bottleneck per stage)");
      if (a.cardinality < 1) fail("cardinality must be at least 1");
      break;
  }
  if (a.widen_factor < 1) fail("widen_factor must be at least 1");
  if (a.dropout < 0 || a.dropout >= 1) fail("dropout must be in [0, 1)");
}

}  // namespace

std::string to_string(BenchmarkNetwork network) {
  switch (network) {
    case BenchmarkNetwork::resnet: return "resnet";
    case BenchmarkNetwork::wrn: return "wrn";
    case BenchmarkNetwork::resnext: return "resnext";
  }
  return "?";
}

BenchmarkNetwork benchmark_network_from_string(const std::string& name) {
  for (auto n : {BenchmarkNetwork::resnet, BenchmarkNetwork::wrn, BenchmarkNetwork::resnext}) {
    if (name == to_string(n)) return n;
  }
  throw std::invalid_argument("unknown benchmark network '" + name + "' (choose from resnet, wrn, resnext)");
}

std::string to_string(BenchmarkRegime regime) { return regime == BenchmarkRegime::cifar ? "cifar" : "non_cifar"; }

BenchmarkRegime benchmark_regime_for_dataset(const std::string& dataset_name) {
  return dataset_name.find("cifar") != std::string::npos ? BenchmarkRegime::cifar : BenchmarkRegime::non_cifar;
}

BenchmarkArchitecture dpimagebench_architecture(BenchmarkNetwork network, BenchmarkRegime regime) {
  const bool cifar = regime == BenchmarkRegime::cifar;
  switch (network) {
    case BenchmarkNetwork::resnet: return {network, cifar ? 164 : 110, 1, 1, 0.0};
    case BenchmarkNetwork::wrn: return {network, cifar ? 28 : 40, cifar ? 10 : 4, 1, 0.3};
    case BenchmarkNetwork::resnext: return {network, cifar ? 28 : 29, cifar ? 10 : 4, 8, 0.0};
  }
  throw std::invalid_argument("unknown benchmark network");
}

std::string describe(const BenchmarkArchitecture& a) {
  std::ostringstream out;
  switch (a.network) {
    case BenchmarkNetwork::resnet: out << "ResNet-" << a.depth; break;
    case BenchmarkNetwork::wrn:
      out << "WRN-" << a.depth << "-" << a.widen_factor << " (dropout " << a.dropout << ")";
      break;
    case BenchmarkNetwork::resnext:
      out << "ResNeXt-" << a.depth << " (" << a.cardinality << " groups, widen " << a.widen_factor << ": "
          << (a.depth - 2) / 9 << " bottlenecks per stage)";
      break;
  }
  return out.str();
}

std::vector<BenchmarkNetwork> dpimagebench_networks(std::int64_t image_size) {
  if (image_size > 32) return {BenchmarkNetwork::resnet, BenchmarkNetwork::wrn};
  return {BenchmarkNetwork::resnet, BenchmarkNetwork::wrn, BenchmarkNetwork::resnext};
}

std::shared_ptr<ImageClassifier> make_benchmark_classifier(const BenchmarkArchitecture& architecture,
                                                           std::int64_t channels, std::int64_t image_size,
                                                           std::int64_t classes) {
  check_architecture(architecture);
  if (channels < 1 || classes < 1) {
    throw std::invalid_argument(describe(architecture) + ": channels and classes must be at least 1, got " +
                                std::to_string(channels) + " and " + std::to_string(classes));
  }
  if (image_size < 4 || image_size % 4 != 0) {
    throw std::invalid_argument(describe(architecture) + ": image size must be a multiple of 4 (28, 32, 64, 128), " +
                                "got " + std::to_string(image_size) +
                                ": the final average pool, image_size / 4 wide, must leave one pixel");
  }
  switch (architecture.network) {
    case BenchmarkNetwork::resnet: return std::make_shared<ResNet>(architecture, channels, image_size, classes);
    case BenchmarkNetwork::wrn: return std::make_shared<WideResNet>(architecture, channels, image_size, classes);
    case BenchmarkNetwork::resnext: return std::make_shared<ResNeXt>(architecture, channels, image_size, classes);
  }
  throw std::invalid_argument("unknown benchmark network");
}

std::shared_ptr<ImageClassifier> make_benchmark_classifier(BenchmarkNetwork network, BenchmarkRegime regime,
                                                           std::int64_t channels, std::int64_t image_size,
                                                           std::int64_t classes) {
  return make_benchmark_classifier(dpimagebench_architecture(network, regime), channels, image_size, classes);
}

ClassifierSchedule dpimagebench_schedule(BenchmarkRegime regime, std::int64_t image_size) {
  ClassifierSchedule s;
  s.ema_decay = 0.9999;
  s.lr_step_gamma = 0.2;
  if (regime == BenchmarkRegime::cifar) {
    s.epochs = 200;
    s.batch_size = 126;
    s.optimizer = ClassifierSchedule::Optimizer::sgd;
    s.lr = 0.1;
    s.momentum = 0.9;
    s.weight_decay = 5e-4;
    s.lr_step_epochs = 60;
    return s;
  }
  s.epochs = 50;
  s.batch_size = 256;
  s.optimizer = ClassifierSchedule::Optimizer::adam;
  s.lr = 0.01;
  s.lr_step_epochs = 20;
  s.micro_batches = image_size == 64 ? 16 : image_size == 128 ? 64 : 1;  // evaluator.py's n_splits
  return s;
}

}  // namespace privdiff::sdk::evaluation
