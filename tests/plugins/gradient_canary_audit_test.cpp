// The gradient-canary audit of the DP-SGD engine (audit/gradient_canaries.hpp) with the PRV
// accountant: the real engine stays below its reported epsilon; an engine without noise and each
// planted-bug engine (tests/fixtures/engines/broken_engines.hpp) is caught.
#include "../fixtures/engines/broken_engines.hpp"
#include "../fixtures/engines/gradient_embedding.hpp"
#include "installed_plugins.hpp"

#include <privdiff/check/replay_models.hpp>

#include <privdiff/audit/gradient_canaries.hpp>
#include <privdiff/components/accountant.hpp>
#include <privdiff/components/auditor.hpp>

#include <gtest/gtest.h>

#include <iostream>

using namespace privdiff;
using namespace privdiff::sdk;

namespace {

constexpr double target_epsilon = 2.0, delta = 1e-5;

engine::DpSgdOptions engine_options(std::int64_t k = 1, std::int64_t physical = 0) {
  engine::DpSgdOptions o;
  o.steps = 4;
  o.max_grad_norm = 1.0;
  o.noise_multiplicity = k;
  o.physical_batch_size = physical;
  o.secure_noise = false;  // reproducible tests; the audit itself does not depend on it
  o.seed = 3;
  return o;  // noise_multiplier unset: "auto", calibrated to target_epsilon
}

audit::GradientCanaryOptions canaries(double norm = 2.0) {
  audit::GradientCanaryOptions a;
  a.canaries = 4000;
  a.fillers = 500;
  a.canary_norm = norm;
  a.seed = 11;
  return a;
}

template <class Engine>
audit::DpSgdFactory broken() {
  return [](const engine::DpSgdOptions& o) { return std::make_unique<Engine>(o); };
}

// One line per audit in the test log: docs/auditing.md's audit table comes from these.
audit::GradientCanaryAudit report(const std::string& engine, audit::GradientCanaryAudit r) {
  std::cout << "[audit] " << engine << ": eps_lower " << r.bound.epsilon_lower << " (" << r.bound.correct << "/"
            << r.bound.guesses << " guesses right), reported eps " << r.reported_epsilon << ", sigma "
            << r.noise_multiplier << ", N " << r.dataset_size << (r.passed() ? ", passed" : ", FAILED") << "\n";
  return r;
}

const Accountant& prv() {
  static const auto accountant = privdiff::testing::make_installed<Accountant>("prv");
  return *accountant;
}

}  // namespace

TEST(GradientCanaryAudit, TheEngineStaysBelowItsReportedEpsilon) {
  for (const auto& [k, physical] : {std::pair<std::int64_t, std::int64_t>{1, 0}, {4, 300}}) {
    const auto r = report("engine, K " + std::to_string(k),
                          audit::audit_with_gradient_canaries(engine_options(k, physical), prv(), target_epsilon, delta,
                                                              canaries()));
    EXPECT_TRUE(r.passed()) << "K=" << k << ": eps_lower " << r.bound.epsilon_lower << " > " << r.reported_epsilon;
    EXPECT_LE(r.reported_epsilon, target_epsilon);
    EXPECT_GT(r.reported_epsilon, 1.9);  // calibrated to the target, not far below it
    EXPECT_EQ(r.steps, 4);
    EXPECT_EQ(r.scores.size(), 4000u);
    // The signal is there: included canaries score higher on average (the audit is not blind).
    double in = 0, out = 0;
    std::int64_t n_in = 0;
    for (std::size_t i = 0; i < r.scores.size(); ++i) {
      (r.included[i] ? in : out) += r.scores[i];
      n_in += r.included[i];
    }
    EXPECT_GT(in / n_in, out / (4000 - n_in));
  }
}

namespace {
class PublicImages : public check::ReplayData {
 public:
  PublicImages() : ReplayData(check::random_images(6, 5, {3, 8, 8})) {}
  bool is_public() const override { return true; }
};
}  // namespace

// A mechanism that reads public data (a correct GEP: its anchor gradients) is audited with it, on the
// canary model's filler coordinates; both its releases are calibrated together (relative_to_sigma).
TEST(GradientCanaryAudit, AMechanismThatReadsPublicDataIsAuditedWithIt) {
  auto a = canaries();
  const auto gep = broken<privdiff::testing::GradientEmbeddingEngine>();
  EXPECT_THROW(audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, a, gep),
               std::runtime_error);  // "GEP: no public data for the anchor gradients"
  const PublicImages public_images;
  a.public_data = &public_images;
  const auto r = report("GEP, public data", audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon,
                                                                                delta, a, gep));
  EXPECT_TRUE(r.passed()) << r.bound.epsilon_lower << " > " << r.reported_epsilon;
  EXPECT_LE(r.reported_epsilon, target_epsilon);
  EXPECT_GT(r.reported_epsilon, 1.9);  // sigma and sigma_e = 0.75 sigma calibrated to the target together
}

TEST(GradientCanaryAudit, SubsampledRunsPassToo) {
  auto a = canaries();
  a.sampling_rate = 0.5;
  const auto r = report("engine, q 0.5", audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, a));
  EXPECT_TRUE(r.passed()) << r.bound.epsilon_lower << " > " << r.reported_epsilon;
}

TEST(GradientCanaryAudit, AnEngineWithoutNoiseIsCaughtWithALargeEpsilon) {
  const auto r = report("no noise", audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta,
                                                                        canaries(), broken<privdiff::testing::NoNoiseEngine>()));
  EXPECT_FALSE(r.passed());
  EXPECT_GT(r.bound.epsilon_lower, 4.5);  // near the most 4000 canaries can show at 95% (~5)
  EXPECT_EQ(r.bound.correct, r.bound.guesses);
}

TEST(GradientCanaryAudit, NoiseDividedBySqrtKIsCaught) {
  const auto r = report("noise / sqrt(K), K 16",
                        audit::audit_with_gradient_canaries(engine_options(16), prv(), target_epsilon, delta, canaries(),
                                                            broken<privdiff::testing::NoiseOverSqrtKEngine>()));
  EXPECT_FALSE(r.passed()) << r.bound.epsilon_lower << " <= " << r.reported_epsilon;
}

TEST(GradientCanaryAudit, ClippingThatSkipsALayerIsCaught) {
  const auto r = report("clipping skips a layer, canaries 8 C",
                        audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, canaries(8.0),
                                                            broken<privdiff::testing::ClippingSkipsOneLayerEngine>()));
  EXPECT_FALSE(r.passed()) << r.bound.epsilon_lower << " <= " << r.reported_epsilon;
  // The real engine clips the same large canaries: it passes.
  EXPECT_TRUE(report("engine, canaries 8 C",
                     audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, canaries(8.0)))
                  .passed());
}

TEST(GradientCanaryAudit, NoiseSplitOverPhysicalChunksIsCaught) {
  const auto r = report("noise split over chunks of 150",
                        audit::audit_with_gradient_canaries(engine_options(1, 150), prv(), target_epsilon, delta,
                                                            canaries(), broken<privdiff::testing::NoisePerChunkEngine>()));
  EXPECT_FALSE(r.passed()) << r.bound.epsilon_lower << " <= " << r.reported_epsilon;
}

TEST(GradientCanaryAudit, RefusesNonPrivateOptionsAndBadAuditOptions) {
  auto o = engine_options();
  o.is_private = false;
  EXPECT_THROW(audit::audit_with_gradient_canaries(o, prv(), target_epsilon, delta, canaries()), std::invalid_argument);
  auto a = canaries();
  a.sampling_rate = 0;
  EXPECT_THROW(audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, a),
               std::invalid_argument);
}

TEST(GradientCanaryAudit, TheOneRunAuditorPluginGivesTheSdkBound) {
  const auto auditor = privdiff::testing::make_installed<Auditor>("one_run");
  const auto with_plugin = audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, canaries(),
                                                               nullptr, auditor.get());
  const auto without = audit::audit_with_gradient_canaries(engine_options(), prv(), target_epsilon, delta, canaries());
  EXPECT_EQ(with_plugin.bound.epsilon_lower, without.bound.epsilon_lower);
  EXPECT_EQ(with_plugin.bound.guesses, without.bound.guesses);
}
