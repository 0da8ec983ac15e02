// DPImageBench's downstream classifiers against a second-language reference
// (benchmark_classifiers_make_reference.py -> fixtures/benchmark_classifiers/parameter_counts.json):
// parameter counts and shapes in order, and the logits of fixed weights on fixed images; the
// settings evaluator.py gives them; small variants learning a square's position, and not learning
// noise labels; and the generic loop: the kept epoch's weights and BatchNorm statistics,
// determinism, micro-batches and torch's StepLR.
#include <privdiff/evaluation/benchmark_classifiers.hpp>
#include <privdiff/evaluation/classifier_training.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

using namespace privdiff::sdk::evaluation;

namespace {

const nlohmann::json& reference() {
  static const nlohmann::json parsed = [] {
    const std::string path = std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/benchmark_classifiers/parameter_counts.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  }();
  return parsed;
}

// The reference script's pattern: sin(0.37 j + 1.3 i) over the flat index j of tensor i.
at::Tensor pattern(std::int64_t index, at::IntArrayRef shape) {
  std::int64_t count = 1;
  for (const std::int64_t size : shape) count *= size;
  const at::Tensor j = at::arange(count, at::kDouble);
  return at::sin(j * 0.37 + 1.3 * static_cast<double>(index)).reshape(shape);
}

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// As set_pattern_weights in the script, in registration order.
void set_pattern_weights(ImageClassifier& net) {
  torch::NoGradGuard no_grad;
  std::int64_t i = 0;
  for (auto& item : net.named_parameters()) {
    at::Tensor& p = item.value();
    at::Tensor values = pattern(i++, p.sizes());
    if (p.dim() >= 2) {
      values = 0.5 * values / std::sqrt(static_cast<double>(p[0].numel()));
    } else {
      values = ends_with(item.key(), "weight") ? 1 + 0.1 * values : 0.1 * values;
    }
    p.copy_(values);
  }
  std::int64_t k = 0;
  for (auto& item : net.named_buffers()) {
    const bool mean = ends_with(item.key(), "running_mean");
    if (!mean && !ends_with(item.key(), "running_var")) continue;
    const at::Tensor values = pattern(k++, item.value().sizes());
    item.value().copy_(mean ? 0.1 * values : 1 + 0.25 * (1 + values));
  }
}

at::Tensor pattern_images(std::int64_t channels, std::int64_t size) {
  const at::Tensor j = at::arange(2 * channels * size * size, at::kDouble);
  return at::sin(j * 0.05 + 0.5).reshape({2, channels, size, size}).to(at::kFloat);
}

BenchmarkArchitecture architecture_of(const nlohmann::json& entry) {
  BenchmarkArchitecture a;
  a.network = benchmark_network_from_string(entry.at("network").get<std::string>());
  a.depth = entry.at("depth").get<std::int64_t>();
  a.widen_factor = entry.at("widen_factor").get<std::int64_t>();
  a.cardinality = entry.at("cardinality").get<std::int64_t>();
  a.dropout = a.network == BenchmarkNetwork::wrn ? 0.3 : 0.0;
  return a;
}

struct Labelled {
  at::Tensor images, labels;
};

// 10 classes: a bright square in one of 2 x 5 places, on a dim diagonal ramp with noise. The ramp
// lets the networks' global average pool tell places apart from local features (it would
// otherwise have to infer position from the zero padding: many more epochs).
Labelled squares(std::int64_t n, std::int64_t channels, std::int64_t size, std::uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor labels = at::randint(0, 10, {n}, gen, at::kLong);
  const at::Tensor ramp = at::linspace(-1, -0.2, size);
  at::Tensor images = at::rand({n, channels, size, size}, gen) * 0.2 - 0.1 +
                      (ramp.view({1, 1, size, 1}) + ramp.view({1, 1, 1, size})) / 2;
  const std::int64_t side = size / 5;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = labels[i].item<std::int64_t>(), top = 3 + (k / 5) * (size / 2), left = 1 + (k % 5) * side;
    images[i].narrow(1, top, side).narrow(2, left, side).fill_(1.0);
  }
  return {images, labels};
}

Labelled with_noise_labels(Labelled data, std::uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  data.labels = at::randint(0, 10, {data.labels.size(0)}, gen, at::kLong);
  return data;
}

}  // namespace

// ---------------------------------------------------------------- the networks

TEST(BenchmarkClassifiers, NetworkNamesRoundTripAndUnknownOnesAreRefused) {
  for (auto n : {BenchmarkNetwork::resnet, BenchmarkNetwork::wrn, BenchmarkNetwork::resnext}) {
    EXPECT_EQ(benchmark_network_from_string(to_string(n)), n);
  }
  try {
    benchmark_network_from_string("vgg");
    FAIL() << "vgg accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("choose from resnet, wrn, resnext"), std::string::npos) << e.what();
  }
}

TEST(BenchmarkClassifiers, RegimeFollowsTheDatasetNameAsEvaluatorPyDoes) {
  EXPECT_EQ(benchmark_regime_for_dataset("cifar10_32"), BenchmarkRegime::cifar);
  EXPECT_EQ(benchmark_regime_for_dataset("cifar100"), BenchmarkRegime::cifar);
  for (const char* name : {"mnist_28", "fmnist_28", "eurosat_32", "celeba_male_32", "camelyon_32"}) {
    EXPECT_EQ(benchmark_regime_for_dataset(name), BenchmarkRegime::non_cifar) << name;
  }
}

TEST(BenchmarkClassifiers, ArchitecturesAndSchedulesAreEvaluatorPys) {
  EXPECT_EQ(describe(dpimagebench_architecture(BenchmarkNetwork::resnet, BenchmarkRegime::non_cifar)), "ResNet-110");
  EXPECT_EQ(describe(dpimagebench_architecture(BenchmarkNetwork::wrn, BenchmarkRegime::cifar)),
            "WRN-28-10 (dropout 0.3)");
  EXPECT_EQ(describe(dpimagebench_architecture(BenchmarkNetwork::resnext, BenchmarkRegime::cifar)),
            "ResNeXt-28 (8 groups, widen 10: 2 bottlenecks per stage)");
  const ClassifierSchedule cifar = dpimagebench_schedule(BenchmarkRegime::cifar, 32);
  EXPECT_EQ(cifar.epochs, 200);
  EXPECT_EQ(cifar.batch_size, 126);
  EXPECT_EQ(cifar.optimizer, ClassifierSchedule::Optimizer::sgd);
  EXPECT_EQ(cifar.lr, 0.1);
  EXPECT_EQ(cifar.momentum, 0.9);
  EXPECT_EQ(cifar.weight_decay, 5e-4);
  EXPECT_EQ(cifar.lr_step_epochs, 60);
  EXPECT_EQ(cifar.lr_step_gamma, 0.2);
  EXPECT_EQ(cifar.ema_decay, 0.9999);
  EXPECT_EQ(cifar.micro_batches, 1);
  const ClassifierSchedule grey = dpimagebench_schedule(BenchmarkRegime::non_cifar, 28);
  EXPECT_EQ(grey.epochs, 50);
  EXPECT_EQ(grey.batch_size, 256);
  EXPECT_EQ(grey.optimizer, ClassifierSchedule::Optimizer::adam);
  EXPECT_EQ(grey.lr, 0.01);
  EXPECT_EQ(grey.weight_decay, 0.0);
  EXPECT_EQ(grey.lr_step_epochs, 20);
  EXPECT_EQ(grey.lr_step_gamma, 0.2);
  EXPECT_EQ(grey.ema_decay, 0.9999);
  EXPECT_EQ(grey.micro_batches, 1);
  EXPECT_EQ(dpimagebench_schedule(BenchmarkRegime::non_cifar, 64).micro_batches, 16);
  EXPECT_EQ(dpimagebench_schedule(BenchmarkRegime::non_cifar, 128).micro_batches, 64);
  EXPECT_EQ(dpimagebench_networks(32).size(), 3U);
  EXPECT_EQ(dpimagebench_networks(64),
            (std::vector<BenchmarkNetwork>{BenchmarkNetwork::resnet, BenchmarkNetwork::wrn}));
}

TEST(BenchmarkClassifiers, MatchThePythonReferenceLayerForLayer) {
  // Every entry: DPImageBench's networks for MNIST (1x28), EuroSAT and CIFAR-10/100 (3x32) and
  // CelebA 64, and the small variants the learning tests train.
  const auto& networks = reference().at("networks");
  ASSERT_GE(networks.size(), 20U);
  for (const auto& entry : networks) {
    const BenchmarkArchitecture a = architecture_of(entry);
    const auto channels = entry.at("channels").get<std::int64_t>(), size = entry.at("image_size").get<std::int64_t>();
    const auto classes = entry.at("classes").get<std::int64_t>();
    SCOPED_TRACE(describe(a) + " on " + std::to_string(channels) + "x" + std::to_string(size) + ", " +
                 std::to_string(classes) + " classes");
    auto net = make_benchmark_classifier(a, channels, size, classes);
    std::int64_t count = 0;
    std::vector<std::vector<std::int64_t>> shapes;
    for (const auto& p : net->parameters()) {
      count += p.numel();
      shapes.push_back(p.sizes().vec());
    }
    EXPECT_EQ(count, entry.at("parameters").get<std::int64_t>());
    EXPECT_EQ(shapes, entry.at("parameter_shapes").get<std::vector<std::vector<std::int64_t>>>());
    std::int64_t statistics = 0;
    for (const auto& b : net->named_buffers()) {
      if (ends_with(b.key(), "running_mean") || ends_with(b.key(), "running_var")) statistics += b.value().numel();
    }
    EXPECT_EQ(statistics, entry.at("running_statistics").get<std::int64_t>());

    set_pattern_weights(*net);
    net->eval();
    torch::NoGradGuard no_grad;
    const at::Tensor logits = net->forward(pattern_images(channels, size));
    EXPECT_EQ(logits.sizes().vec(), entry.at("output_shape").get<std::vector<std::int64_t>>());
    const at::Tensor want = at::tensor(entry.at("pattern_logits").get<std::vector<double>>(), at::kFloat);
    const double scale = want.abs().max().item<double>();
    EXPECT_LT((logits.flatten() - want).abs().max().item<double>(), 1e-4 * scale);
  }
}

TEST(BenchmarkClassifiers, RefuseSizesTheirPoolCannotTakeAndImpossibleDepths) {
  auto refused = [](const BenchmarkArchitecture& a, std::int64_t size, const std::string& why) {
    try {
      make_benchmark_classifier(a, 1, size, 10);
      ADD_FAILURE() << describe(a) << " at " << size << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(dpimagebench_architecture(BenchmarkNetwork::wrn, BenchmarkRegime::non_cifar), 30, "multiple of 4");
  refused({BenchmarkNetwork::resnet, 100, 1, 1, 0}, 28, "6n + 2");
  refused({BenchmarkNetwork::wrn, 26, 2, 1, 0.3}, 28, "6n + 4");
  refused({BenchmarkNetwork::resnext, 10, 1, 2, 0}, 28, "at least 11");
}

// ---------------------------------------------------------------- small variants learn

namespace {

struct LearningCase {
  BenchmarkArchitecture architecture;
  std::int64_t channels, size;
};

void PrintTo(const LearningCase& c, std::ostream* out) {
  *out << describe(c.architecture) << " on " << c.channels << "x" << c.size;
}

std::string case_name(const testing::TestParamInfo<LearningCase>& info) {
  return to_string(info.param.architecture.network) + "_" + std::to_string(info.param.channels) + "x" +
         std::to_string(info.param.size);
}

// The fixture's small variants: one block per stage, narrow (ResNeXt keeps its 64-wide stem and
// grouped 3 x 3 convolutions: it is ~20x the others' cost).
const BenchmarkArchitecture small_resnet{BenchmarkNetwork::resnet, 8, 1, 1, 0};
const BenchmarkArchitecture small_wrn{BenchmarkNetwork::wrn, 10, 1, 1, 0.3};
const BenchmarkArchitecture small_resnext{BenchmarkNetwork::resnext, 11, 1, 2, 0};

// DPImageBench's non-CIFAR schedule (Adam, EMA 0.9999 with its warm-up) scaled to 100 images:
// batches of 5 (BatchNorm's running statistics need the steps), lr 0.003, no step.
ClassifierSchedule scaled_schedule(std::int64_t epochs) {
  ClassifierSchedule s = dpimagebench_schedule(BenchmarkRegime::non_cifar, 28);
  s.epochs = epochs;
  s.batch_size = 5;
  s.lr = 0.003;
  s.lr_step_epochs = 0;
  return s;
}

struct Trained {
  double test_accuracy;
  std::string log;  ///< the loop's, shown when a check fails
};

Trained train_and_test(const LearningCase& c, bool noise_labels, std::int64_t epochs) {
  Labelled train = squares(100, c.channels, c.size, 1), validation = squares(100, c.channels, c.size, 2);
  Labelled test = squares(200, c.channels, c.size, 3);
  if (noise_labels) {
    train = with_noise_labels(train, 11);
    validation = with_noise_labels(validation, 12);
    test = with_noise_labels(test, 13);
  }
  at::manual_seed(5);
  auto net = make_benchmark_classifier(c.architecture, c.channels, c.size, 10);
  std::ostringstream log;
  log << describe(c.architecture) << " on " << c.channels << "x" << c.size << (noise_labels ? ", noise labels" : "")
      << ":\n";
  train_selecting_epoch(*net, train.images, train.labels, validation.images, validation.labels, scaled_schedule(epochs),
                        at::kCPU, 3, log);
  const double accuracy = classifier_accuracy(*net, test.images, test.labels);
  log << "  test accuracy " << accuracy << "\n";
  return {accuracy, log.str()};
}

}  // namespace

class SmallBenchmarkNetwork : public testing::TestWithParam<LearningCase> {};

TEST_P(SmallBenchmarkNetwork, LearnsWhereTheSquareIs) {
  const Trained t = train_and_test(GetParam(), false, 4);
  RecordProperty("test_accuracy", std::to_string(t.test_accuracy));
  EXPECT_GT(t.test_accuracy, 0.5) << t.log;  // chance: 0.1
}

INSTANTIATE_TEST_SUITE_P(BenchmarkClassifiers, SmallBenchmarkNetwork,
                         testing::Values(LearningCase{small_resnet, 1, 28}, LearningCase{small_resnet, 3, 32},
                                         LearningCase{small_wrn, 1, 28}, LearningCase{small_wrn, 3, 32},
                                         LearningCase{small_resnext, 1, 28}, LearningCase{small_resnext, 3, 32}),
                         case_name);

class SmallBenchmarkNetworkOnNoise : public testing::TestWithParam<LearningCase> {};

TEST_P(SmallBenchmarkNetworkOnNoise, StaysNearChanceOnHeldOutImages) {
  // Selecting on validation must not leak into the held-out score: 200 test images, chance 0.1,
  // std ~0.02.
  const Trained t = train_and_test(GetParam(), true, 2);
  RecordProperty("test_accuracy", std::to_string(t.test_accuracy));
  EXPECT_LE(t.test_accuracy, 0.2) << t.log;
}

INSTANTIATE_TEST_SUITE_P(BenchmarkClassifiers, SmallBenchmarkNetworkOnNoise,
                         testing::Values(LearningCase{small_resnet, 1, 28}, LearningCase{small_wrn, 1, 28},
                                         LearningCase{small_resnext, 1, 28}),
                         case_name);

// ---------------------------------------------------------------- the generic loop

namespace {

// A cheap classifier with what the loop must handle: BatchNorm buffers and dropout.
class TinyNet : public ImageClassifier {
 public:
  TinyNet(bool batch_norm, double dropout) : dropout_(dropout) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)));
    if (batch_norm) bn_ = register_module("bn", torch::nn::BatchNorm2d(8));
    fc_ = register_module("fc", torch::nn::Linear(8 * 7 * 7, 10));
  }
  at::Tensor forward(const at::Tensor& images) override {
    at::Tensor x = conv_->forward(images);
    if (bn_) x = bn_->forward(x);
    x = at::max_pool2d(at::relu(x), {2, 2});
    if (dropout_ > 0) x = at::dropout(x, dropout_, is_training());
    return fc_->forward(x.flatten(1));
  }

 private:
  double dropout_;
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

struct TinyRun {
  std::shared_ptr<TinyNet> net;
  SelectedEpoch selected;
  std::string log;
};

TinyRun train_tiny(const ClassifierSchedule& s, std::uint64_t seed, bool batch_norm = true, double dropout = 0.2) {
  const Labelled train = squares(60, 1, 14, 1), validation = squares(60, 1, 14, 2);
  at::manual_seed(1);
  TinyRun run{std::make_shared<TinyNet>(batch_norm, dropout), {}, {}};
  std::ostringstream log;
  run.selected = train_selecting_epoch(*run.net, train.images, train.labels, validation.images, validation.labels, s,
                                       at::kCPU, seed, log);
  run.log = log.str();
  return run;
}

bool same_state(ImageClassifier& a, ImageClassifier& b) {
  auto pa = a.parameters(), pb = b.parameters();
  auto ba = a.buffers(), bb = b.buffers();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (!at::equal(pa[i], pb[i])) return false;
  }
  for (std::size_t i = 0; i < ba.size(); ++i) {
    if (!at::equal(ba[i], bb[i])) return false;
  }
  return true;
}

}  // namespace

TEST(ClassifierTraining, StepLearningRateIsTorchsStepLR) {
  const auto& rates = reference().at("step_lr");
  for (auto regime : {BenchmarkRegime::cifar, BenchmarkRegime::non_cifar}) {
    const ClassifierSchedule s = dpimagebench_schedule(regime, 32);
    const auto want = rates.at(to_string(regime)).get<std::vector<double>>();
    ASSERT_EQ(static_cast<std::int64_t>(want.size()), s.epochs);
    for (std::int64_t e = 0; e < s.epochs; ++e) {
      EXPECT_EQ(scheduled_learning_rate(s, e), want[static_cast<std::size_t>(e)])
          << to_string(regime) << " epoch " << e;
    }
  }
}

TEST(ClassifierTraining, KeepsTheBestEpochsWeightsAndBatchNormStatistics) {
  // After epoch 3 the rate jumps 1000x: later epochs get worse, and the kept state must be the
  // one after the best epoch, BatchNorm's running statistics included (with and without EMA).
  for (double ema : {0.0, 0.9}) {
    SCOPED_TRACE("ema " + std::to_string(ema));
    ClassifierSchedule s;
    s.epochs = 6;
    s.batch_size = 10;
    s.optimizer = ClassifierSchedule::Optimizer::sgd;
    s.lr = 0.05;
    s.momentum = 0.9;
    s.lr_step_epochs = 3;
    s.lr_step_gamma = 1e4;
    s.ema_decay = ema;
    const TinyRun full = train_tiny(s, 4);
    EXPECT_EQ(full.selected.epochs_run, 6);
    ASSERT_LE(full.selected.best_epoch, 3) << full.log;
    EXPECT_GT(full.selected.validation_accuracy, 0.5);
    // The kept net scores what was selected, and has seen best_epoch x 6 training batches.
    const Labelled validation = squares(60, 1, 14, 2);
    EXPECT_EQ(classifier_accuracy(*full.net, validation.images, validation.labels), full.selected.validation_accuracy);
    const at::Tensor tracked = full.net->named_buffers()["bn.num_batches_tracked"];
    EXPECT_EQ(tracked.item<std::int64_t>(), full.selected.best_epoch * 6);
    // Training stops after the best epoch: the same state, parameters and buffers, bit for bit.
    s.epochs = full.selected.best_epoch;
    const TinyRun stopped = train_tiny(s, 4);
    EXPECT_TRUE(same_state(*full.net, *stopped.net));
  }
}

TEST(ClassifierTraining, IsDeterministicForASeed) {
  ClassifierSchedule s;
  s.epochs = 3;
  s.batch_size = 8;
  s.ema_decay = 0.99;
  const TinyRun a = train_tiny(s, 7), b = train_tiny(s, 7), c = train_tiny(s, 8);
  EXPECT_TRUE(same_state(*a.net, *b.net));
  EXPECT_EQ(a.selected.best_epoch, b.selected.best_epoch);
  EXPECT_EQ(a.selected.validation_accuracy, b.selected.validation_accuracy);
  EXPECT_FALSE(same_state(*a.net, *c.net));  // other shuffles and dropout masks
}

TEST(ClassifierTraining, MicroBatchesSumToTheWholeBatchsGradient) {
  // Without BatchNorm (which sees the parts) and dropout, a batch of 20 in two parts of 10 is the
  // same SGD step as the whole batch.
  ClassifierSchedule s;
  s.epochs = 2;
  s.batch_size = 20;
  s.optimizer = ClassifierSchedule::Optimizer::sgd;
  s.lr = 0.1;
  s.momentum = 0.9;
  const TinyRun whole = train_tiny(s, 2, false, 0);
  s.micro_batches = 2;
  const TinyRun parts = train_tiny(s, 2, false, 0);
  auto pw = whole.net->parameters(), pp = parts.net->parameters();
  for (std::size_t i = 0; i < pw.size(); ++i) EXPECT_TRUE(at::allclose(pw[i], pp[i], 1e-4, 1e-6)) << "parameter " << i;
}

TEST(ClassifierTraining, RefusesMismatchedDataAndImpossibleSchedules) {
  const Labelled data = squares(20, 1, 14, 1);
  TinyNet net(true, 0);
  std::ostringstream log;
  auto refused = [&](const ClassifierSchedule& s, const at::Tensor& labels, const std::string& why) {
    try {
      train_selecting_epoch(net, data.images, labels, data.images, data.labels, s, at::kCPU, 0, log);
      ADD_FAILURE() << "accepted; expected: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  ClassifierSchedule s;
  refused(s, data.labels.narrow(0, 0, 19), "labels must be int64 [20]");
  refused(s, data.labels.to(at::kInt), "labels must be int64 [20]");
  s.batch_size = 10;
  s.micro_batches = 3;
  refused(s, data.labels, "micro_batches must divide batch_size (10)");
  s.micro_batches = 1;
  s.epochs = 0;
  refused(s, data.labels, "epochs must be at least 1");
}
