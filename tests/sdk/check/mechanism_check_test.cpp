// The SDK's mechanism checks (check/, audit/mechanism_check.hpp) and the clip-rule hook they rely on:
// a clip rule is held to C on every engine path and equals a naive per-example loop; the noise check
// passes the engine and fails planted noise bugs; check_mechanism passes the engine and reports a
// planted sensitivity bug.
#include "../../fixtures/engines/broken_engines.hpp"
#include "../engine/record_replay.hpp"

#include <privdiff/audit/mechanism_check.hpp>
#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>

using namespace privdiff;
using namespace privdiff::testing::replay;
namespace check = privdiff::sdk::check;

namespace {

constexpr double clip = 1.0, gamma_ = 0.01;

// Automatic clipping's rule, R / (||g|| + gamma).
at::Tensor automatic(const at::Tensor& squared) { return clip / (squared.sum(1).sqrt() + gamma_); }

class AutomaticClippingEngine : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;

 protected:
  at::Tensor clip_factors(const at::Tensor& squared) const override { return automatic(squared); }
};

engine::DpSgdOptions base_options() {
  engine::DpSgdOptions o;
  o.max_grad_norm = clip;
  return o;
}

}  // namespace

TEST(ClipRule, FactorsAreHeldToTheSensitivity) {
  const at::Tensor squared = at::tensor({0.0, 4.0, 0.25, 100.0, std::nan("")}, at::kDouble).view({5, 1});
  const at::Tensor f = engine::clip_factors(squared, clip, engine::ClipMode::flat,
                                            [](const at::Tensor& s) { return at::full({s.size(0)}, 10.0, s.options()); });
  const at::Tensor norms = squared.view({5}).nan_to_num(0).sqrt();
  EXPECT_LE((f * norms).max().item<double>(), clip);                 // capped: no example above C
  EXPECT_EQ(f[4].item<double>(), 0.0);                               // not finite: no contribution
  EXPECT_DOUBLE_EQ(f[0].item<double>(), 10.0);                       // a zero gradient may take any factor
  const at::Tensor nan_rule = engine::clip_factors(squared.narrow(0, 0, 4), clip, engine::ClipMode::flat,
                                                   [](const at::Tensor& s) { return at::full({s.size(0)}, std::nan(""), s.options()); });
  EXPECT_EQ(nan_rule.abs().sum().item<double>(), 0.0);
  const at::Tensor negative = engine::clip_factors(squared.narrow(0, 0, 4), clip, engine::ClipMode::flat,
                                                   [](const at::Tensor& s) { return -at::ones({s.size(0)}, s.options()); });
  EXPECT_EQ(negative.abs().sum().item<double>(), 0.0);
  // Automatic clipping is below the cap: its factors are its own.
  const at::Tensor a = engine::clip_factors(squared.narrow(0, 1, 3), clip, engine::ClipMode::flat, automatic);
  EXPECT_TRUE(at::allclose(a, automatic(squared.narrow(0, 1, 3))));
  // A [B] rule under per-layer clipping: one factor per tensor, each tensor within C / sqrt(P).
  const at::Tensor two = at::tensor({1.0, 9.0, 0.01, 0.04}, at::kDouble).view({2, 2});
  const at::Tensor per_layer = engine::clip_factors(two, clip, engine::ClipMode::per_layer, automatic);
  ASSERT_EQ(per_layer.sizes(), (at::IntArrayRef{2, 2}));
  EXPECT_LE((per_layer * two.sqrt()).max().item<double>(), clip / std::sqrt(2.0) + 1e-12);
  // A rule that writes into its input or looks at the batch gains nothing: it sees a copy of one row.
  const at::Tensor big = at::tensor({1e4, 1.0}, at::kDouble).view({2, 1});
  const at::Tensor shrunk = engine::clip_factors(big, clip, engine::ClipMode::flat, [](const at::Tensor& s) {
    s.sqrt_().sqrt_();  // "norm" 10 instead of 100: the cap must not follow
    return at::full({s.size(0)}, 1.0, s.options());
  });
  EXPECT_LE((shrunk * big.view({2}).sqrt()).max().item<double>(), clip);
  std::vector<std::int64_t> rows_seen;
  (void)engine::clip_factors(at::ones({5, 3}, at::kDouble), clip, engine::ClipMode::flat, [&](const at::Tensor& s) {
    rows_seen.push_back(s.size(0));
    return at::ones({s.size(0)}, s.options());
  });
  EXPECT_EQ(rows_seen, std::vector<std::int64_t>(5, 1));
  // An undefined result is the standard rule.
  EXPECT_TRUE(at::equal(engine::clip_factors(big, clip, engine::ClipMode::flat, [](const at::Tensor&) { return at::Tensor(); }),
                        engine::clip_factors(big, clip, engine::ClipMode::flat)));
}

// The rule on each engine path equals sum_i g_i R / (||g_i|| + gamma) from a per-example loop.
TEST(ClipRule, EveryEnginePathRunsTheRule) {
  ReplayModel model(at::kDouble, 0.0);
  const ReplayData data(random_images(6, 3) * 4);
  const engine::RowLoss loss = [&](const at::Tensor& examples) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    return model.training_loss(data.images(examples), {}, 1, gen);
  };
  const engine::PerExampleGradients g = engine::per_example_gradients(model.module(), loss, 6, 1);
  at::Tensor squared = at::zeros({6}, at::kDouble);
  for (const auto& t : g.grads) squared += t.reshape({6, -1}).pow(2).sum(1);
  const at::Tensor factors = clip / (squared.sqrt() + gamma_);
  std::vector<at::Tensor> naive;
  for (const auto& t : g.grads) {
    std::vector<std::int64_t> shape(static_cast<std::size_t>(t.dim()), 1);
    shape[0] = 6;
    naive.push_back((t * factors.view(shape)).sum(0));
  }
  engine::NormPlanner planner;
  const engine::ClippedSum paths[] = {
      engine::clipped_gradient_sum(model.module(), loss, 6, 1, clip, engine::ClipMode::flat, planner, automatic),
      engine::micro_batch_clipped_sum(model.module(), loss, 6, 1, clip, engine::ClipMode::flat, automatic),
      engine::clip_and_sum(g, clip, engine::ClipMode::flat, automatic)};
  for (const auto& path : paths) {
    for (std::size_t j = 0; j < naive.size(); ++j) EXPECT_TRUE(at::allclose(path.sums[j], naive[j], 1e-9, 1e-12)) << j;
  }
}

TEST(NoiseCheck, PassesTheEngineAndFailsPlantedNoiseBugs) {
  check::NoiseCheckOptions o;
  o.every_direction = false;  // FindsADirectionWithoutNoiseThatCrossesTensors'
  const check::NoiseCheck engine_check = check::check_noise_calibration(check::engine_under_test(base_options()), o);
  std::cout << "engine:\n" << engine_check.describe();
  EXPECT_TRUE(engine_check.passed()) << engine_check.describe();
  EXPECT_NEAR(engine_check.ratio(), 1.0, 0.05);
  const check::NoiseCheck per_chunk =
      check::check_noise_calibration(check::engine_under_test<privdiff::testing::NoisePerChunkEngine>(base_options()), o);
  EXPECT_FALSE(per_chunk.passed()) << per_chunk.describe();
  const check::NoiseCheck over_sqrt_k = check::check_noise_calibration(
      check::engine_under_test<privdiff::testing::NoiseOverSqrtKEngine>([] {
        auto b = base_options();
        b.noise_multiplicity = 4;
        return b;
      }()),
      o);
  EXPECT_FALSE(over_sqrt_k.passed()) << over_sqrt_k.describe();
  EXPECT_NEAR(over_sqrt_k.ratio(), 0.5, 0.05);
  const check::NoiseCheck none = check::check_noise_calibration(check::engine_under_test<privdiff::testing::NoNoiseEngine>(base_options()), o);
  EXPECT_FALSE(none.passed());
}

// On another model whose loss draws noise of its own (a diffusion loss's noise levels; here the stand-in
// with loss noise 0.3), every replay's loss draws the same (ModelSpec::same_loss_draws): the correct
// engine passes with every tensor near 1, and a tensor without noise is still the same in every replay.
TEST(NoiseCheck, OnAnotherModelTheLossDrawsTheSameInEveryReplay) {
  check::NoiseCheckOptions o;
  o.replays = 10;
  o.model.make = [] { return std::make_unique<check::ReplayModel>(at::kDouble, 0.3, 2); };
  const check::NoiseCheck engine_check = check::check_noise_calibration(check::engine_under_test(base_options()), o);
  EXPECT_TRUE(engine_check.passed()) << engine_check.describe();
  EXPECT_NEAR(engine_check.worst_tensor_ratio, 1.0, 0.5) << engine_check.describe();
  EXPECT_EQ(engine_check.directions_checked, 0);  // not on a real model: 2 d + 1 replays
  const check::NoiseCheck norm =
      check::check_noise_calibration(check::engine_under_test<privdiff::testing::NoNoiseOnNormTensorsEngine>(base_options()), o);
  ASSERT_FALSE(norm.violations.empty()) << norm.describe();
  EXPECT_NE(norm.violations.front().find("tensor norm."), std::string::npos) << norm.describe();
  EXPECT_NE(norm.violations.front().find("receives no noise"), std::string::npos) << norm.describe();
}

namespace {
// The stand-in with a frozen part: its norm tensors play an autoencoder beside the network, which
// train = "all" leaves frozen (as on a latent diffusion model).
class WithAFrozenPart : public check::ReplayModel {
 public:
  WithAFrozenPart() : ReplayModel(at::kDouble, 0.3, 2) {}
  std::vector<sdk::ParameterInfo> parameters_with_roles() override {
    std::vector<sdk::ParameterInfo> out;
    for (const auto& item : module().named_parameters()) {
      out.push_back({item.key(), item.key().rfind("norm.", 0) == 0 ? "autoencoder" : "io", -1, item.value()});
    }
    return out;
  }
};
}  // namespace

// A frozen part releases nothing: the noise check measures the tensors the stage trains.
TEST(NoiseCheck, OnAModelWithAFrozenPartOnlyTheTrainedTensorsAreMeasured) {
  check::NoiseCheckOptions o;
  o.replays = 10;
  o.model.make = [] { return std::make_unique<WithAFrozenPart>(); };
  const check::NoiseCheck r = check::check_noise_calibration(check::engine_under_test(base_options()), o);
  EXPECT_TRUE(r.passed()) << r.describe();
  EXPECT_EQ(r.degrees_of_freedom, (357 - 8) * 9) << r.describe();  // the norm's 4 weights and 4 biases left out
}

// Two bugs an out-of-tree trial planted that one pooled figure of one step cannot see (issue 66).
TEST(NoiseCheck, NamesATensorWithoutNoiseAndNoiseReusedAcrossSteps) {
  check::NoiseCheckOptions o;
  o.every_direction = false;
  const check::NoiseCheck engine_check = check::check_noise_calibration(check::engine_under_test(base_options()), o);
  EXPECT_TRUE(engine_check.passed()) << engine_check.describe();
  EXPECT_NEAR(engine_check.worst_tensor_ratio, 1.0, 0.25) << engine_check.describe();
  EXPECT_NEAR(engine_check.step_difference_std / engine_check.configured_std, 1.0, 0.05) << engine_check.describe();
  EXPECT_NEAR(engine_check.second_step_std / engine_check.configured_std, 1.0, 0.05) << engine_check.describe();

  const check::NoiseCheck norm =
      check::check_noise_calibration(check::engine_under_test<privdiff::testing::NoNoiseOnNormTensorsEngine>(base_options()), o);
  std::cout << "no noise on the norm tensors:\n" << norm.describe();
  EXPECT_FALSE(norm.passed());
  // The pooled figure alone would pass it: 349 of 357 coordinates carry their noise.
  EXPECT_GE(norm.ratio(), norm.low) << norm.describe();
  EXPECT_LT(norm.worst_tensor_ratio, 1e-9) << norm.describe();
  EXPECT_NE(norm.worst_tensor.find("norm"), std::string::npos) << norm.describe();
  ASSERT_FALSE(norm.violations.empty());
  EXPECT_NE(norm.violations.front().find("tensor norm."), std::string::npos) << norm.describe();
  EXPECT_NE(norm.violations.front().find("receives no noise"), std::string::npos) << norm.describe();

  const check::NoiseCheck reused =
      check::check_noise_calibration(check::engine_under_test<privdiff::testing::NoiseReusedEngine>(base_options()), o);
  std::cout << "the first step's noise reused:\n" << reused.describe();
  EXPECT_FALSE(reused.passed());
  EXPECT_NEAR(reused.ratio(), 1.0, 0.05) << reused.describe();  // one step's noise is right
  EXPECT_LT(reused.step_difference_std, 0.1 * reused.configured_std) << reused.describe();
  bool named = false;
  for (const auto& v : reused.violations) named = named || v.find("repeats the first's") != std::string::npos;
  EXPECT_TRUE(named) << reused.describe();
}

// GEP without noise on its subspace (issue 66): 4 noiseless directions that cross every tensor. Per
// tensor and pooled the noise looks right; in every direction it does not.
TEST(NoiseCheck, FindsADirectionWithoutNoiseThatCrossesTensors) {
  check::NoiseCheckOptions o;
  const check::NoiseCheck engine_check = check::check_noise_calibration(check::engine_under_test(base_options()), o);
  std::cout << "engine:\n" << engine_check.describe();
  EXPECT_TRUE(engine_check.passed()) << engine_check.describe();
  EXPECT_EQ(engine_check.directions_checked, 357);
  EXPECT_GT(engine_check.smallest_direction_ratio, 0.6) << engine_check.describe();  // ~1 at the edge
  const check::NoiseCheck gep = check::check_noise_calibration(
      check::engine_under_test<privdiff::testing::NoiselessSubspaceEngine>(base_options()), o);
  std::cout << "a noiseless subspace:\n" << gep.describe();
  EXPECT_FALSE(gep.passed());
  EXPECT_GE(gep.ratio(), gep.low) << gep.describe();  // the pooled figure alone would pass it
  EXPECT_LT(gep.smallest_direction_ratio, 1e-6) << gep.describe();
  ASSERT_EQ(gep.violations.size(), 1u) << gep.describe();
  EXPECT_NE(gep.violations.front().find("a direction of the parameter space gets almost no noise"), std::string::npos);
}

TEST(MechanismCheck, PassesTheEngineAndAutomaticClippingAndReportsTwiceC) {
  const auto engine_result = sdk::audit::check_mechanism(check::engine_under_test(base_options()), {});
  std::cout << "engine:\n" << engine_result.describe();
  EXPECT_TRUE(engine_result.passed()) << engine_result.describe();
  const auto automatic_result = sdk::audit::check_mechanism(check::engine_under_test<AutomaticClippingEngine>(base_options()), {});
  EXPECT_TRUE(automatic_result.passed()) << automatic_result.describe();
  const auto twice = sdk::audit::check_mechanism(check::engine_under_test<ClipsAtTwiceC>(base_options()), {});
  EXPECT_FALSE(twice.passed());
  EXPECT_NEAR(twice.replay.worst_ratio(), 2.0, 1e-3) << twice.describe();
}
