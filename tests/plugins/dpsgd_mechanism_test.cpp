// The dpsgd and nonprivate mechanism plugins driving a tiny model built from per-example layers.
#include "installed_plugins.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/seeds.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

using namespace privdiff;
using namespace privdiff::sdk;

namespace {

// Denoises 4x4 images with one per-example Linear layer: K noisy copies per example.
class TinyModel : public Model {
 public:
  TinyModel() : net_(std::make_shared<torch::nn::Module>()) {
    lin_ = net_->register_module("lin", std::make_shared<engine::Linear>(16, 16));
    net_->to(at::kDouble);
  }
  torch::nn::Module& module() override { return *net_; }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor&, const Conditioning&) override {
    return lin_->forward(x.flatten(1)).view_as(x);
  }
  std::vector<ParameterInfo> parameters_with_roles() override { return {}; }
  std::vector<std::int64_t> sample_shape() const override { return {1, 4, 4}; }
  at::Tensor training_loss(const at::Tensor& images, const Conditioning&, std::int64_t k, at::Generator& gen) override {
    const at::Tensor x = images.repeat_interleave(k, 0).flatten(1);
    const at::Tensor noisy = x + loss_noise * at::randn(x.sizes(), gen, x.options());
    return (lin_->forward(noisy) - x).pow(2).mean(1);
  }
  std::shared_ptr<engine::Linear> lin_;
  double loss_noise = 0.3;  ///< the loss's own randomness (0: a deterministic loss)

 private:
  std::shared_ptr<torch::nn::Module> net_;
};

class RandomImages : public Dataset {
 public:
  RandomImages(std::int64_t n, bool is_public, std::uint64_t seed = 1) : public_(is_public) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    images_ = at::rand({n, 1, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1;
  }
  std::int64_t size() const override { return images_.size(0); }
  at::Tensor images(const at::Tensor& idx) const override { return images_.index_select(0, idx); }
  at::Tensor labels(const at::Tensor& idx) const override { return at::zeros({idx.numel()}, at::kLong); }
  std::int64_t num_classes() const override { return 1; }
  bool is_public() const override { return public_; }
  std::string name() const override { return "random images"; }

 private:
  at::Tensor images_;
  bool public_;
};

// Record i's image carries i (its first pixel is i / N) and its caption says "record i".
class NumberedCaptionedImages : public RandomImages {
 public:
  explicit NumberedCaptionedImages(std::int64_t n) : RandomImages(n, false), numbered_(RandomImages::images(at::arange(n))) {
    numbered_.select(1, 0).select(1, 0).select(1, 0).copy_(at::arange(n, at::kDouble) / static_cast<double>(n));
  }
  at::Tensor images(const at::Tensor& idx) const override { return numbered_.index_select(0, idx); }
  bool has_captions() const override { return true; }
  std::vector<std::string> captions(const at::Tensor& idx) const override {
    std::vector<std::string> out;
    for (std::int64_t i = 0; i < idx.numel(); ++i) out.push_back("record " + std::to_string(idx[i].item<std::int64_t>()));
    return out;
  }

 private:
  at::Tensor numbered_;
};

// A TinyModel that checks every row's caption against its image: what the engine hands over, per
// chunk and per subset of rows the clipping takes.
class CaptionCheckingModel : public TinyModel {
 public:
  explicit CaptionCheckingModel(std::int64_t n) : n_(n) {}
  at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond, std::int64_t k, at::Generator& gen) override {
    if (static_cast<std::int64_t>(cond.captions.size()) != images.size(0)) ++mismatched;
    for (std::size_t r = 0; r < cond.captions.size(); ++r) {
      if (cond.captions[r].rfind("record ", 0) != 0) {
        ++synthetic;  // the engine's calibration: a fixed caption, never a record's
        continue;
      }
      const auto i = std::llround(images[static_cast<std::int64_t>(r)][0][0][0].item<double>() * static_cast<double>(n_));
      ++(cond.captions[r] == "record " + std::to_string(i) ? matched : mismatched);
    }
    return TinyModel::training_loss(images, cond, k, gen);
  }
  std::int64_t matched = 0, mismatched = 0, synthetic = 0;

 private:
  std::int64_t n_;
};

std::unique_ptr<Mechanism> make(const std::string& id, std::map<std::string, ConfigValue> values) {
  return privdiff::testing::make_installed<Mechanism>(id, std::move(values));
}

std::map<std::string, ConfigValue> options(std::int64_t batch, std::int64_t steps, double sigma) {
  return {{"batch_size", ConfigValue{batch}}, {"steps", ConfigValue{steps}}, {"noise_multiplier", ConfigValue{sigma}},
          {"optimizer", ConfigValue{std::string("sgd")}}, {"momentum", ConfigValue{0.0}}, {"lr", ConfigValue{0.5}},
          {"ema", ConfigValue{0.0}}, {"seed", ConfigValue{std::int64_t{3}}}, {"secure_noise", ConfigValue{false}}};
}

std::vector<at::Tensor> snapshot(TinyModel& m) {
  return {m.lin_->weight.detach().clone(), m.lin_->bias.detach().clone()};
}

// Trains a TinyModel from fixed weights for one stage (at `stage_index`); returns its weights.
std::vector<at::Tensor> train_from_fixed_weights(const Dataset& data, const std::map<std::string, ConfigValue>& opts,
                                                 PrivacyLedger& ledger, std::int64_t stage_index = 0,
                                                 double loss_noise = 0.3) {
  TinyModel model;
  model.loss_noise = loss_noise;
  {
    torch::NoGradGuard g;
    model.lin_->weight.fill_(0.01);
    model.lin_->bias.fill_(0.0);
  }
  auto mech = make("dpsgd", opts);
  StageContext ctx{model, data, ledger, 0, {}};
  ctx.stage_index = stage_index;
  mech->run(ctx);
  return snapshot(model);
}

}  // namespace

TEST(DpSgdMechanism, RecordsOneLedgerEntryPerLogicalStepAndMatchesItsPlan) {
  TinyModel model;
  RandomImages data(200, false);
  PrivacyLedger ledger;
  auto mech = make("dpsgd", options(20, 7, 1.3));
  const auto before = snapshot(model);
  StageContext ctx{model, data, ledger, 0, {}};
  mech->run(ctx);
  ASSERT_EQ(ledger.entries().size(), 1u);
  const auto step = PrivacyEvent::poisson_sampled(0.1, PrivacyEvent::gaussian(1.3));
  EXPECT_EQ(ledger.entries()[0], PrivacyEvent::self_composed(step, 7));
  EXPECT_EQ(mech->planned_events(200), ledger.total());
  EXPECT_FALSE(at::equal(snapshot(model)[0], before[0]));
}

TEST(DpSgdMechanism, AnEmptyBatchIsAPureNoiseUpdateAndOneLedgerEntry) {
  // q = 1 / 5000: find a seed whose first batch is empty, then check the update is exactly
  // -lr * noise / (q N) with the stage's own noise stream.
  const std::int64_t n = 5000;
  std::int64_t seed = 0;
  auto stream = [&](engine::StreamPurpose purpose) {
    return engine::RandomStream::reproducible(static_cast<std::uint64_t>(seed), 0, purpose);
  };
  while (engine::PoissonSampler(n, 1.0 / n, stream(engine::StreamPurpose::sampling)).next().numel() != 0) ++seed;
  TinyModel model;
  RandomImages data(n, false);
  PrivacyLedger ledger;
  auto opts = options(1, 1, 2.0);
  opts["seed"] = ConfigValue{seed};
  opts["max_grad_norm"] = ConfigValue{0.5};
  auto mech = make("dpsgd", opts);
  const auto before = snapshot(model);
  StageContext ctx{model, data, ledger, 0, {}};
  mech->run(ctx);
  ASSERT_EQ(ledger.entries().size(), 1u);
  EXPECT_EQ(ledger.entries()[0], PrivacyEvent::poisson_sampled(1.0 / n, PrivacyEvent::gaussian(2.0)));
  engine::GaussianNoise noise(stream(engine::StreamPurpose::noise));
  const auto after = snapshot(model);
  for (std::size_t j = 0; j < after.size(); ++j) {
    const at::Tensor expected = before[j] - 0.5 * noise.sample(before[j], 2.0 * 0.5) / 1.0;  // q N = 1
    EXPECT_TRUE(at::allclose(after[j], expected, 1e-12, 1e-12));
  }
}

TEST(DpSgdMechanism, PhysicalChunksGiveTheSameTrainingAsWholeBatches) {
  // Same batches, same clipped sum, noise once per logical step, whatever the chunking. (The loss's
  // own draws are seeded per chunk, so that a chunk's draws do not depend on which rank of a
  // multi-process run trains it: they follow the chunking. A deterministic loss isolates the rest.)
  RandomImages data(300, false);
  auto train = [&](std::int64_t physical) {
    PrivacyLedger ledger;
    auto opts = options(40, 4, 1.0);
    opts["physical_batch_size"] = ConfigValue{physical};
    return train_from_fixed_weights(data, opts, ledger, 0, /*loss_noise=*/0.0);
  };
  const auto whole = train(0), chunked = train(7);
  for (std::size_t j = 0; j < whole.size(); ++j) EXPECT_TRUE(at::allclose(whole[j], chunked[j], 1e-10, 1e-12));
}

TEST(DpSgdMechanism, NonPrivateRefusesPrivateDataAndSpendsNothingOnPublicData) {
  TinyModel model;
  PrivacyLedger ledger;
  auto opts = options(20, 3, 1.0);
  opts.erase("noise_multiplier");
  opts.erase("secure_noise");
  auto mech = make("nonprivate", opts);
  EXPECT_FALSE(mech->is_private());
  RandomImages private_data(100, false), public_data(100, true);
  StageContext refused{model, private_data, ledger, 0, {}};
  try {
    mech->run(refused);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("refuses private data"), std::string::npos) << e.what();
  }
  const auto before = snapshot(model);
  StageContext ok{model, public_data, ledger, 0, {}};
  mech->run(ok);
  EXPECT_TRUE(ledger.entries().empty());
  EXPECT_FALSE(at::equal(snapshot(model)[0], before[0]));
}

// Defect 1 of the privacy audit: by default a private stage's noise and batches come from the OS
// CSPRNG — two runs of one configuration differ and the ledger has no caveat; a seed is refused
// unless reproducible noise is opted into, which puts a caveat in the ledger.
TEST(DpSgdMechanism, NoiseIsSecretByDefaultAndASeedNeedsTheReproducibleOptIn) {
  auto opts = options(20, 2, 1.0);
  opts.erase("secure_noise");  // the default
  try {
    make("dpsgd", opts);
    FAIL();
  } catch (const sdk::KeyValueError& e) {  // at the stage's seed, for the host to place in the recipe
    EXPECT_EQ(e.key_path(), "mechanism.seed");
    EXPECT_NE(std::string(e.what()).find("set secure_noise = false"), std::string::npos) << e.what();
  }
  opts.erase("seed");
  RandomImages data(100, false);
  auto train = [&](const std::map<std::string, ConfigValue>& o, PrivacyLedger& ledger) {
    return train_from_fixed_weights(data, o, ledger);
  };
  PrivacyLedger l1, l2, l3, l4;
  const auto a = train(opts, l1), b = train(opts, l2);
  EXPECT_FALSE(at::equal(a[0], b[0]));  // same seed (the run's), different noise
  EXPECT_EQ(l1.entries()[0].count(), 2);
  EXPECT_TRUE(l1.caveats().empty());
  auto reproducible = options(20, 2, 1.0);  // secure_noise = false, seed 3
  const auto c = train(reproducible, l3), d = train(reproducible, l4);
  EXPECT_TRUE(at::equal(c[0], d[0]));
  ASSERT_EQ(l3.caveats().size(), 1u);
  EXPECT_EQ(l3.caveats()[0], engine::reproducible_noise_caveat());
  // Non-private stages have nothing to keep secret: a seed is fine without the opt-in.
  auto pretrain = options(20, 2, 1.0);
  pretrain.erase("noise_multiplier");
  pretrain.erase("secure_noise");
  EXPECT_NO_THROW(make("nonprivate", pretrain));
}

// Defect 8: two stages given the same explicit seed must not reuse one noise stream.
TEST(DpSgdMechanism, StagesWithTheSameSeedDrawDifferentNoise) {
  RandomImages data(100, false);
  auto train = [&](std::int64_t stage) {
    PrivacyLedger ledger;
    return train_from_fixed_weights(data, options(20, 2, 1.0), ledger, stage);
  };
  EXPECT_TRUE(at::equal(train(0)[0], train(0)[0]));
  EXPECT_FALSE(at::equal(train(0)[0], train(1)[0]));
}

TEST(DpSgdMechanism, AutoNoiseMustBeCalibratedBeforeTraining) {
  auto opts = options(20, 2, 1.0);
  opts.erase("noise_multiplier");
  auto mech = make("dpsgd", opts);
  EXPECT_TRUE(mech->needs_calibration());
  EXPECT_THROW(mech->planned_events(100), std::logic_error);
  EXPECT_EQ(mech->planned_events_with(2.0, 100),
            PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.2, PrivacyEvent::gaussian(2.0)), 2));
  mech->set_noise_multiplier(2.0);
  EXPECT_FALSE(mech->needs_calibration());
  // Epochs become ceil(epochs N / B) steps.
  auto by_epochs = options(30, 1, 1.0);
  by_epochs.erase("steps");
  by_epochs["epochs"] = ConfigValue{2.0};
  EXPECT_EQ(make("dpsgd", by_epochs)->planned_events(100).count(), 7);  // ceil(2 * 100 / 30)
  auto both = options(30, 1, 1.0);
  both["epochs"] = ConfigValue{2.0};
  EXPECT_THROW(make("dpsgd", both), std::runtime_error);
}

// steps = 1e12 (a typo) started a run that would never end; a stage is at most 1e9 steps, given as
// steps (the schema) or made of epochs (refused with the numbers, before training).
TEST(DpSgdMechanism, RefusesAStageOfMoreThanABillionSteps) {
  auto steps = options(1, 1, 1.0);
  steps["steps"] = ConfigValue{std::int64_t{1000000000000}};
  EXPECT_THROW(make("dpsgd", steps), std::invalid_argument);
  auto epochs = options(1, 1, 1.0);
  epochs.erase("steps");
  epochs["epochs"] = ConfigValue{1e6};  // the most the schema takes
  auto mech = make("dpsgd", epochs);
  EXPECT_NO_THROW(mech->planned_events_with(1.0, 1000));  // 1e9 steps: the limit itself
  try {
    mech->planned_events_with(1.0, 60000);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "epochs = 1e+06 of 60000 examples at batch_size 1 make 6e+10 steps, more than the "
                                     "1000000000 a stage may take; give fewer epochs");
  }
  epochs["epochs"] = ConfigValue{1e7};
  EXPECT_THROW(make("dpsgd", epochs), std::invalid_argument);
}

// A batch larger than the dataset is refused with the numbers, not capped to q = 1.
TEST(DpSgdMechanism, RefusesABatchLargerThanTheDataset) {
  auto mech = make("dpsgd", options(120, 2, 1.0));
  try {
    mech->planned_events(100);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "batch_size 120 is larger than the dataset (100 examples): the sampling rate "
                                     "q = batch_size / N must be at most 1; use batch_size <= 100");
  }
  EXPECT_NO_THROW(mech->planned_events(120));  // q = 1 exactly is fine
}

TEST(DpSgdMechanism, EachRowsCaptionTravelsWithItsImageThroughBatchesAndChunks) {
  const std::int64_t n = 300;
  NumberedCaptionedImages data(n);
  for (const std::int64_t physical : {std::int64_t{0}, std::int64_t{7}}) {
    CaptionCheckingModel model(n);
    PrivacyLedger ledger;
    auto opts = options(40, 5, 1.0);
    opts["physical_batch_size"] = ConfigValue{physical};
    auto mech = make("dpsgd", opts);
    StageContext ctx{model, data, ledger, 0, {}};
    mech->run(ctx);
    EXPECT_EQ(model.mismatched, 0) << "physical_batch_size " << physical;
    EXPECT_GT(model.matched, 100) << "physical_batch_size " << physical;  // about 5 steps of 40 records
  }
}
