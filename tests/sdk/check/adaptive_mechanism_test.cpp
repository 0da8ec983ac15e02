// Mechanisms that release more than their gradient or keep state between steps (issue 66): the
// adaptive-clipping example (examples/out_of_tree_plugin) passes every check, resumes exactly and states
// its two releases of a batch as one event; adaptive clippings whose clip norm follows something
// unreleased fail the next-steps replay; a second PoissonSampled event for the step's batch is refused;
// a declared release must be made once per step, and nothing undeclared can be released.
#include "../../../examples/out_of_tree_plugin/adaptive_clipping.hpp"
#include "../../fixtures/engines/broken_engines.hpp"
#include "../../fixtures/engines/gradient_embedding.hpp"
#include "../engine/record_replay.hpp"

#include <privdiff/audit/mechanism_check.hpp>
#include <privdiff/check/mechanism_under_test.hpp>
#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/check/replay_check.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

using namespace privdiff;
using namespace privdiff::testing::replay;
namespace check = privdiff::sdk::check;

namespace {

check::MechanismUnderTest adaptive() {
  return check::mechanism_from_config(
      adaptive_clipping::schema(), "stage", {{"batch_size", sdk::ConfigValue{std::int64_t{8}}}},
      [](const sdk::Config& config) { return std::make_unique<adaptive_clipping::AdaptiveClipping>(config); });
}

// A factory of the mechanism under test for run_stage: `steps` steps, reproducible streams keyed by the seed.
MechanismFactory runs_of(const check::MechanismUnderTest& make, std::int64_t steps, std::int64_t batch = 7) {
  return [make, steps, batch](std::uint64_t seed) {
    check::MechanismSettings s;
    s.batch_size = batch;
    s.steps = steps;
    s.noise_multiplier = 0.5;
    s.seed = seed;
    return make(s);
  };
}

bool any_has(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

// Declares a release it never makes / makes a release it never declared.
class ForgetsItsRelease : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;

 protected:
  std::vector<StepRelease> step_releases() const override { return {{"count", 1.0, 5.0}}; }
};
class ReleasesUndeclared : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;

 protected:
  void after_step_gradient(const at::Tensor& norms) override {
    release_statistic("count", at::full({1}, static_cast<double>(norms.numel()), at::kDouble));
  }
};

}  // namespace

TEST(AdaptiveMechanisms, AdaptiveQuantileClippingPassesEveryCheck) {
  const sdk::audit::MechanismCheck r = sdk::audit::check_mechanism(adaptive(), {});
  std::cout << r.describe();
  EXPECT_TRUE(r.replay.violations.empty()) << r.describe();
  EXPECT_TRUE(r.noise.passed()) << r.describe();
  ASSERT_EQ(r.noise.releases.size(), 1u);  // the count's noise, measured
  EXPECT_NEAR(r.noise.releases[0].measured_std / r.noise.releases[0].stated_std, 1.0, 0.5);
  EXPECT_NE(r.noise.ledger.find("Composed([Gaussian(1), Gaussian(10)])"), std::string::npos) << r.noise.ledger;
}

TEST(AdaptiveMechanisms, TheClipNormMovesIsPublishedAndIsRestoredOnResume) {
  const ReplayData data(random_images(21));
  const StageRun run = run_stage(runs_of(adaptive(), 4), 3, ModelSpec{}, data);
  ASSERT_EQ(run.sensitivities.size(), 4u);
  EXPECT_EQ(run.sensitivities[0], 1.0);  // C_0 = max_grad_norm
  EXPECT_NE(run.sensitivities[1], 1.0);  // then the quantile's
  EXPECT_EQ(run.metrics[0].at("clip_norm"), run.sensitivities[1]);  // step 1 reports the next step's C
  ASSERT_EQ(run.statistics[0].size(), 1u);
  EXPECT_EQ(run.statistics[0][0].name, "unclipped count, step 1");
  const Report same = audit_resume("adaptive clipping, resumed after step 2", runs_of(adaptive(), 4),
                                   runs_of(adaptive(), 4), 3, ModelSpec{}, data, 2);
  std::cout << same.describe();
  EXPECT_TRUE(same.violations.empty()) << same.describe();
}

TEST(AdaptiveMechanisms, StateKeptWithoutNoiseFailsTheNextStepsReplay) {
  const std::vector<std::pair<std::string, check::MechanismUnderTest>> planted{
      {"mean norm", check::engine_under_test<privdiff::testing::MeanNormClippingEngine>(engine::DpSgdOptions{})},
      {"raw count", check::engine_under_test<privdiff::testing::RawCountClippingEngine>(engine::DpSgdOptions{})},
      {"unaccounted count",
       check::engine_under_test<privdiff::testing::UnaccountedCountClippingEngine>(engine::DpSgdOptions{})}};
  for (const auto& [name, make] : planted) {
    const Report r = check::check_by_record_replay(make, check::ReplayCheckOptions{});
    std::cout << name << ":\n" << r.describe();
    EXPECT_TRUE(any_has(r.violations, "x reaches a later step through something the mechanism did not release"))
        << name;
  }
}

TEST(AdaptiveMechanisms, ASecondEventForTheStepsBatchIsRefused) {
  const sdk::audit::MechanismCheck r = sdk::audit::check_mechanism(
      check::engine_under_test<privdiff::testing::TwoEventsPerStepEngine>(engine::DpSgdOptions{}), {});
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(any_has(r.replay.violations, "epsilon is under-counted")) << r.describe();
}

TEST(AdaptiveMechanisms, TheLedgerSaysWhenAStepHoldsTwoPoissonEventsOfOneRate) {
  sdk::PrivacyLedger ledger;
  const auto g = sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(1.0));
  ledger.record(g);
  EXPECT_EQ(ledger.separately_sampled(), "");
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.02, sdk::PrivacyEvent::gaussian(3.0)));
  EXPECT_EQ(ledger.separately_sampled(), "");  // other rates: other batches
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(9.0)));
  EXPECT_NE(ledger.separately_sampled().find("sampling rate 0.01"), std::string::npos);
  ledger.begin_step();
  ledger.record(g, 2);  // twice in a row, in one call
  EXPECT_NE(ledger.separately_sampled(), "");
  ledger.begin_step();
  ledger.record(g);
  EXPECT_EQ(ledger.separately_sampled(), "");
}

TEST(AdaptiveMechanisms, ADeclaredReleaseIsMadeOnceAStepAndNothingUndeclaredIsReleased) {
  const ReplayData data(random_images(21));
  auto expect_refused = [&](const MechanismFactory& make, const std::string& text, const std::string& what) {
    try {
      run_stage(make, 3, ModelSpec{}, data);
      ADD_FAILURE() << what << " went through";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_refused(runs_of(check::engine_under_test<ForgetsItsRelease>(engine::DpSgdOptions{}), 2),
                 "the declared release 'count' was not made", "a declared release that was not made");
  expect_refused(runs_of(check::engine_under_test<ReleasesUndeclared>(engine::DpSgdOptions{}), 2),
                 "not among the mechanism's step_releases()", "an undeclared release");
  // Planned: one event per step on the batch, the declared release composed with the gradient.
  check::MechanismSettings s;
  s.batch_size = 7;
  s.steps = 2;
  s.noise_multiplier = 0.5;
  const std::string plan = check::engine_under_test<ForgetsItsRelease>(engine::DpSgdOptions{})(s)->planned_events(700).to_string();
  EXPECT_EQ(plan, "SelfComposed(PoissonSampled(0.01, Composed([Gaussian(0.5), Gaussian(5)])), 2)");
}

namespace {

// A DP-SGD mechanism that reads public data (as GEP reads its anchor gradients' images): it stops
// without them, and with records of another shape than the model's.
class ReadsPublicData : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;
  std::optional<std::string> public_data_name() const override { return "public"; }
  void run(sdk::StageContext& context) override {
    if (!context.public_data) throw std::runtime_error("no public data");
    const at::Tensor x = context.public_data->images(at::arange(2, at::kLong));
    if (x.sizes() != at::IntArrayRef({2, 1, 4, 4})) throw std::runtime_error("public records of another shape");
    DpSgdMechanism::run(context);
  }
};

class PublicImages : public ReplayData {
 public:
  PublicImages() : ReplayData(random_images(6, 5, {3, 8, 8})) {}
  bool is_public() const override { return true; }
};

// Moves its clip norm while clipping, not after the step's releases.
class ClipNormWhileClipping : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    set_clip_norm(0.5);
    return DpSgdMechanism::clipped_chunk_sum(module, loss, examples);
  }
};

}  // namespace

TEST(AdaptiveMechanisms, AMechanismThatReadsPublicDataIsCheckedWithIt) {
  const auto make = check::engine_under_test<ReadsPublicData>(engine::DpSgdOptions{});
  sdk::audit::MechanismCheckOptions without;
  without.noise.every_direction = false;
  const sdk::audit::MechanismCheck refused = sdk::audit::check_mechanism(make, without);
  EXPECT_FALSE(refused.passed());
  EXPECT_TRUE(any_has(refused.replay.violations, "no public data")) << refused.describe();

  const PublicImages public_images;
  const check::StandInPublicData stand_in(public_images);  // 3x8x8 -> 1x4x4
  EXPECT_TRUE(stand_in.is_public());
  sdk::audit::MechanismCheckOptions with = without;
  with.replay.model.public_data = &stand_in;
  with.noise.public_data = &stand_in;
  const sdk::audit::MechanismCheck r = sdk::audit::check_mechanism(make, with);
  EXPECT_TRUE(r.replay.violations.empty()) << r.describe();
  EXPECT_TRUE(r.noise.passed()) << r.describe();
}

TEST(AdaptiveMechanisms, TheClipNormMovesOnlyAfterTheStepsReleases) {
  const ReplayData data(random_images(21));
  try {
    run_stage(runs_of(check::engine_under_test<ClipNormWhileClipping>(engine::DpSgdOptions{}), 1), 3, ModelSpec{}, data);
    ADD_FAILURE() << "set_clip_norm while clipping went through";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("set_clip_norm outside after_step_gradient"), std::string::npos) << e.what();
  }
}

namespace {

// GEP that releases its embedding with noise but writes the clean one into the gradient, and still
// states the basis: the stated directions then carry no noise.
class GepWithoutNoiseInItsBasis : public privdiff::testing::GradientEmbeddingEngine {
 public:
  using GradientEmbeddingEngine::GradientEmbeddingEngine;

 protected:
  void after_step_gradient(const at::Tensor&) override {
    release_statistic("embedding", embedding_);
    set_grads(flat(grads()) + at::matmul(basis_, embedding_) / expected_);
    state_noise_basis("embedding", basis_);
  }
};

}  // namespace

// A correct GEP (less noise on its public subspace than off it) passes with its basis stated; one that
// states a basis whose directions carry no noise fails the every-direction test.
TEST(AdaptiveMechanisms, GepIsMeasuredInTheBasisItStates) {
  const PublicImages public_images;
  const check::StandInPublicData stand_in(public_images);
  sdk::audit::MechanismCheckOptions options;
  options.replay.model.public_data = &stand_in;
  options.noise.public_data = &stand_in;
  const sdk::audit::MechanismCheck r = sdk::audit::check_mechanism(
      check::engine_under_test<privdiff::testing::GradientEmbeddingEngine>(engine::DpSgdOptions{}), options);
  std::cout << r.describe();
  EXPECT_TRUE(r.replay.violations.empty()) << r.describe();
  EXPECT_TRUE(r.noise.passed()) << r.describe();
  EXPECT_TRUE(any_has(r.noise.notes, "3 directions of 'embedding'")) << r.describe();
  EXPECT_NE(r.noise.ledger.find("Composed([Gaussian(1), Gaussian(0.75)])"), std::string::npos) << r.noise.ledger;
  // Its embedding's multiplier is relative to sigma (StepRelease::relative_to_sigma): calibration scales both.
  engine::DpSgdOptions two_steps;
  two_steps.steps = 2;
  two_steps.batch_size = 10;
  const privdiff::testing::GradientEmbeddingEngine gep{two_steps};
  const std::string planned = gep.planned_events_with(2.0, 100).to_string();
  EXPECT_NE(planned.find("Composed([Gaussian(2), Gaussian(1.5)])"), std::string::npos) << planned;

  const sdk::audit::MechanismCheck lie =
      sdk::audit::check_mechanism(check::engine_under_test<GepWithoutNoiseInItsBasis>(engine::DpSgdOptions{}), options);
  std::cout << lie.describe();
  EXPECT_FALSE(lie.noise.passed()) << lie.describe();
  EXPECT_TRUE(any_has(lie.noise.violations, "a direction of the parameter space gets almost no noise")) << lie.describe();
}


namespace {

// GEP that releases its embedding but writes the clean one plus noise of its own into the gradient:
// the part in the stated basis is then revealed twice (the release and the gradient), at a cost the
// ledger's one release does not state.
class GepWithOtherNoiseInItsBasis : public privdiff::testing::GradientEmbeddingEngine {
 public:
  using GradientEmbeddingEngine::GradientEmbeddingEngine;

 protected:
  void after_step_gradient(const at::Tensor&) override {
    const at::Tensor e = release_statistic("embedding", embedding_);
    set_grads(flat(grads()) + at::matmul(basis_, embedding_ + at::randn_like(e) * 0.75) / expected_);
    state_noise_basis("embedding", basis_);
  }
};

// GEP that declares its release's sensitivity 100 times too small, releases a value that does not
// depend on the data, and puts the clean embedding with that release's (tiny) noise into the gradient.
class GepUnderstatingItsSensitivity : public privdiff::testing::GradientEmbeddingEngine {
 public:
  using GradientEmbeddingEngine::GradientEmbeddingEngine;

 protected:
  std::vector<StepRelease> step_releases() const override { return {{"embedding", options().max_grad_norm / 100, 0.75}}; }
  void after_step_gradient(const at::Tensor&) override {
    const at::Tensor e = release_statistic("embedding", at::zeros_like(embedding_));
    set_grads(flat(grads()) + at::matmul(basis_, embedding_ + e) / expected_);
    state_noise_basis("embedding", basis_);
    if (twice_) state_noise_basis("embedding", basis_);
  }

 public:
  bool twice_ = false;
};

}  // namespace

// What a stated basis cannot hide: other noise in it than the release's, a release whose sensitivity
// is below the gradient's (its part in the basis has the gradient's), a basis stated twice.
TEST(AdaptiveMechanisms, AStatedBasisHoldsTheReleaseAtTheGradientsSensitivity) {
  const PublicImages public_images;
  const check::StandInPublicData stand_in(public_images);
  check::NoiseCheckOptions o;
  o.public_data = &stand_in;
  o.every_direction = false;  // the basis's own tests must find these
  const check::NoiseCheck other =
      check::check_noise_calibration(check::engine_under_test<GepWithOtherNoiseInItsBasis>(engine::DpSgdOptions{}), o);
  std::cout << other.describe();
  EXPECT_TRUE(any_has(other.violations, "is not that release")) << other.describe();
  const check::NoiseCheck small =
      check::check_noise_calibration(check::engine_under_test<GepUnderstatingItsSensitivity>(engine::DpSgdOptions{}), o);
  std::cout << small.describe();
  EXPECT_TRUE(any_has(small.violations, "the update in the 3 directions stated for 'embedding'")) << small.describe();
  const ReplayData data(random_images(21));
  const auto twice = [](std::uint64_t seed) {
    check::MechanismSettings s;
    s.batch_size = 7;
    s.noise_multiplier = 0.5;
    s.seed = seed;
    auto m = std::make_unique<GepUnderstatingItsSensitivity>(check::options_for_check(engine::DpSgdOptions{}, s));
    m->twice_ = true;
    return std::unique_ptr<sdk::Mechanism>(std::move(m));
  };
  ModelSpec spec;
  spec.public_data = &stand_in;
  try {
    run_stage(twice, 3, spec, data);
    ADD_FAILURE() << "a basis stated twice went through";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("stated twice in one step"), std::string::npos) << e.what();
  }
}
