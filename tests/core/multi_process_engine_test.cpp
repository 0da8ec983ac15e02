// The DP-SGD engine as two ranks of one run, over LibTorch's c10d (Gloo on loopback, each rank a
// thread here; tests/e2e/multi_process_test.sh runs real processes): the noise is added once per
// logical step, not once per rank, and both ranks hold the same model.
#include "parallel/process_group.hpp"
#include "parallel/local_launcher.hpp"

#include <privdiff/components/model.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <thread>

namespace privdiff::core {
namespace {

using namespace sdk;

// One per-example Linear layer whose loss ignores it: every per-example gradient is zero, so each
// update is the noise alone, -lr * N(0, (sigma C)^2) / (q N).
class ZeroGradientModel : public Model {
 public:
  ZeroGradientModel() : net_(std::make_shared<torch::nn::Module>()) {
    lin_ = net_->register_module("lin", std::make_shared<engine::Linear>(16, 16));
    net_->to(at::kDouble);
  }
  torch::nn::Module& module() override { return *net_; }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor&, const Conditioning&) override { return x; }
  std::vector<ParameterInfo> parameters_with_roles() override { return {}; }
  std::vector<std::int64_t> sample_shape() const override { return {1, 4, 4}; }
  at::Tensor training_loss(const at::Tensor& images, const Conditioning&, std::int64_t k, at::Generator&) override {
    return (lin_->forward(images.repeat_interleave(k, 0).flatten(1)) * 0).sum(1);
  }
  at::Tensor weights() const { return at::cat({lin_->weight.detach().flatten(), lin_->bias.detach()}); }

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::shared_ptr<engine::Linear> lin_;
};

class Images : public Dataset {
 public:
  explicit Images(std::int64_t n) : images_(at::rand({n, 1, 4, 4}, at::kDouble)) {}
  std::int64_t size() const override { return images_.size(0); }
  at::Tensor images(const at::Tensor& idx) const override { return images_.index_select(0, idx); }
  at::Tensor labels(const at::Tensor& idx) const override { return at::zeros({idx.numel()}, at::kLong); }
  std::int64_t num_classes() const override { return 1; }
  bool is_public() const override { return false; }
  std::string name() const override { return "images"; }

 private:
  at::Tensor images_;
};

constexpr double sigma = 2.0, lr = 1.0;
constexpr std::int64_t n = 100, batch = 10, steps = 60;

struct RankResult {
  std::vector<double> updates;  // every coordinate's change, every step
  at::Tensor final_weights;
  PrivacyLedger ledger;
};

RankResult train(Collective* ranks, std::int64_t noise_multiplicity) {
  engine::DpSgdOptions options;
  options.batch_size = batch;
  options.steps = steps;
  options.noise_multiplier = sigma;
  options.optimizer = "sgd";
  options.lr = lr;
  options.momentum = 0;
  options.ema = 0;
  options.physical_batch_size = 3;
  options.noise_multiplicity = noise_multiplicity;
  engine::DpSgdMechanism mechanism(options);
  ZeroGradientModel model;
  Images data(n);
  RankResult result;
  StageContext context{model, data, result.ledger, 0, {}};
  context.collective = ranks;
  at::Tensor before = model.weights().clone();
  context.step_done = [&](const StepReport&, const StateWriter&) {
    const at::Tensor now = model.weights().clone();
    const at::Tensor delta = now - before;
    result.updates.insert(result.updates.end(), delta.data_ptr<double>(), delta.data_ptr<double>() + delta.numel());
    before = now;
  };
  mechanism.run(context);
  result.final_weights = model.weights();
  return result;
}

// Runs `world` ranks as threads of this process, joined by a real Gloo process group.
std::vector<RankResult> train_as_ranks(int world, std::int64_t noise_multiplicity) {
  const int port = free_loopback_port();
  std::vector<RankResult> results(static_cast<std::size_t>(world));
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ProcessPlace place{rank, world, rank, world, "127.0.0.1", port};
        auto ranks = connect_processes(place, "gloo", c10::Device(c10::kCPU), std::chrono::seconds(60));
        results[static_cast<std::size_t>(rank)] = train(ranks.get(), noise_multiplicity);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return results;
}

double variance(const std::vector<double>& x) {
  double sum = 0, squares = 0;
  for (const double v : x) {
    sum += v;
    squares += v * v;
  }
  const double mean = sum / static_cast<double>(x.size());
  return squares / static_cast<double>(x.size()) - mean * mean;
}

// Per-step update std: lr * sigma * C / (q N), with C = 1 and q N = batch.
constexpr double expected_std = lr * sigma * 1.0 / batch;

TEST(MultiProcessEngine, OneProcessAddsTheCalibratedNoise) {
  const RankResult one = train(nullptr, 1);
  ASSERT_EQ(one.updates.size(), static_cast<std::size_t>(steps * (16 * 16 + 16)));
  // 16,320 draws: the sample variance is within 5% of the truth with overwhelming probability
  // (its relative standard error is sqrt(2 / 16320) = 1.1%).
  EXPECT_NEAR(variance(one.updates) / (expected_std * expected_std), 1.0, 0.05);
}

TEST(MultiProcessEngine, TwoRanksAddTheNoiseOnceNotOncePerRank) {
  if (!has_backend("gloo")) GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  for (const std::int64_t k : {1, 3}) {
    const auto ranks = train_as_ranks(2, k);
    ASSERT_EQ(ranks.size(), 2u);
    // Noise added by each rank would double the variance; by none, leave only zeros.
    EXPECT_NEAR(variance(ranks[0].updates) / (expected_std * expected_std), 1.0, 0.05) << "K = " << k;
    // One model: the ranks hold the same weights after every step, and one ledger each, equal.
    EXPECT_TRUE(at::equal(ranks[0].final_weights, ranks[1].final_weights)) << "K = " << k;
    EXPECT_EQ(ranks[0].ledger.total(), ranks[1].ledger.total());
    EXPECT_EQ(ranks[0].ledger.total(),
              PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.1, PrivacyEvent::gaussian(sigma)), steps));
  }
}

}  // namespace
}  // namespace privdiff::core
