#include <privdiff/components/privacy_event.hpp>
#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk;

TEST(PrivacyEvent, ConstructorsValidate) {
  EXPECT_THROW(PrivacyEvent::gaussian(-1), std::invalid_argument);
  EXPECT_THROW(PrivacyEvent::gaussian(std::nan("")), std::invalid_argument);
  EXPECT_THROW(PrivacyEvent::poisson_sampled(1.5, PrivacyEvent::gaussian(1)), std::invalid_argument);
  EXPECT_THROW(PrivacyEvent::self_composed(PrivacyEvent::gaussian(1), -1), std::invalid_argument);
  EXPECT_EQ(PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(1.1)), 1000)
                .to_string(),
            "SelfComposed(PoissonSampled(0.01, Gaussian(1.1000000000000001)), 1000)");
}

TEST(PrivacyLedger, RunLengthCompressesIdenticalSteps) {
  PrivacyLedger ledger;
  const auto step = PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(1.1));
  for (int i = 0; i < 1000; ++i) ledger.record(step);
  ledger.record(PrivacyEvent::gaussian(5));
  ledger.record(step, 10);
  ASSERT_EQ(ledger.entries().size(), 3u);
  EXPECT_EQ(ledger.entries()[0], PrivacyEvent::self_composed(step, 1000));
  EXPECT_EQ(ledger.entries()[1], PrivacyEvent::gaussian(5));
  EXPECT_EQ(ledger.entries()[2], PrivacyEvent::self_composed(step, 10));
  EXPECT_EQ(ledger.total().kind(), PrivacyEvent::Kind::composed);
  EXPECT_EQ(PrivacyLedger{}.total().kind(), PrivacyEvent::Kind::no_op);
  EXPECT_THROW(ledger.record(step, 0), std::invalid_argument);
}

TEST(PrivacyEventJson, RoundTripsExactly) {
  const auto event = PrivacyEvent::composed(
      {PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.1 / 3, PrivacyEvent::gaussian(1.0 / 3)), 7),
       PrivacyEvent::gaussian(0.7), PrivacyEvent::no_op()});
  EXPECT_EQ(privacy_event_from_json(to_json(event)), event);

  PrivacyLedger ledger;
  ledger.record(PrivacyEvent::gaussian(2), 3);
  ledger.record(PrivacyEvent::poisson_sampled(0.5, PrivacyEvent::gaussian(1)));
  const PrivacyLedger back = privacy_ledger_from_json(to_json(ledger));
  EXPECT_EQ(back.entries(), ledger.entries());
}

TEST(PrivacyEventJson, MalformedInputSaysWhere) {
  try {
    privacy_event_from_json(R"({"type":"self_composed","count":3,"event":{"type":"gaussian"}})");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "$.event: missing \"noise_multiplier\"");
  }
  EXPECT_THROW(privacy_event_from_json(R"({"type":"laplace"})"), std::invalid_argument);
  EXPECT_THROW(privacy_event_from_json("{"), std::invalid_argument);
  EXPECT_THROW(privacy_ledger_from_json(R"({"entries":[]})"), std::invalid_argument);
  // Found by fuzz/ledger_json_fuzzer: JSON library errors other than syntax errors escaped as their
  // own exception types (a number too large for a double; a value of the wrong type).
  EXPECT_THROW(privacy_ledger_from_json("790e6111111"), std::invalid_argument);
  EXPECT_THROW(privacy_ledger_from_json(R"({"format": 7, "entries": []})"), std::invalid_argument);
  EXPECT_THROW(privacy_ledger_from_json(R"({"format": "privdiff-ledger", "version": 6e40, "entries": []})"),
               std::invalid_argument);  // was an out-of-range double-to-int conversion (UBSan)
  EXPECT_THROW(privacy_ledger_from_json(R"({"format": "privdiff-ledger", "version": 1.5, "entries": []})"),
               std::invalid_argument);
  EXPECT_THROW(privacy_event_from_json(R"({"type": "gaussian", "noise_multiplier": 1e999})"), std::invalid_argument);
}

TEST(GaussianSteps, MergesEqualStepsAndDropsWhatSpendsNothing) {
  const auto step = PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(1.1));
  const auto event = PrivacyEvent::composed(
      {PrivacyEvent::self_composed(step, 600), PrivacyEvent::self_composed(step, 400),
       PrivacyEvent::self_composed(PrivacyEvent::gaussian(3.0), 2), PrivacyEvent::no_op(),
       PrivacyEvent::poisson_sampled(0.0, PrivacyEvent::composed({})),  // q = 0: nothing, whatever it wraps
       PrivacyEvent::poisson_sampled(1.0, PrivacyEvent::composed({PrivacyEvent::gaussian(3.0)})),  // q = 1: no subsampling
       PrivacyEvent::self_composed(step, 0)});
  const auto steps = gaussian_steps(event);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].sampling_rate, 0.01);
  EXPECT_EQ(steps[0].noise_multiplier, 1.1);
  EXPECT_EQ(steps[0].count, 1000);
  EXPECT_EQ(steps[1].sampling_rate, 1.0);
  EXPECT_EQ(steps[1].noise_multiplier, 3.0);
  EXPECT_EQ(steps[1].count, 3);
  EXPECT_EQ(non_gaussian_reason(event), "");
}

TEST(GaussianSteps, ReleasesOfOneBatchAreOneGaussian) {
  // Two releases of one Poisson batch (adaptive clipping's clipped sum and noisy count): one Gaussian of
  // 1/s^2 = 1/s1^2 + 1/s2^2 on that batch, counts inside it multiplying the precision.
  const auto two = PrivacyEvent::poisson_sampled(
      0.01, PrivacyEvent::composed({PrivacyEvent::gaussian(1.0), PrivacyEvent::gaussian(2.0), PrivacyEvent::no_op()}));
  auto steps = gaussian_steps(PrivacyEvent::self_composed(two, 1000));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].sampling_rate, 0.01);
  EXPECT_NEAR(steps[0].noise_multiplier, 1 / std::sqrt(1.0 + 0.25), 1e-15);
  EXPECT_EQ(steps[0].count, 1000);
  const auto three = PrivacyEvent::poisson_sampled(
      0.2, PrivacyEvent::composed({PrivacyEvent::self_composed(PrivacyEvent::gaussian(3.0), 3)}));
  EXPECT_NEAR(*same_batch_noise_multiplier(three.inner()), std::sqrt(3.0), 1e-15);
  // A release without noise makes the batch's release noiseless: sigma 0 (infinite epsilon), never dropped.
  EXPECT_EQ(*same_batch_noise_multiplier(PrivacyEvent::composed({PrivacyEvent::gaussian(1.0), PrivacyEvent::gaussian(0)})), 0);
  EXPECT_FALSE(same_batch_noise_multiplier(PrivacyEvent::composed({})));
}

TEST(GaussianSteps, RefusesWhatIsNotAGaussianStepAndCountsThatOverflow) {
  // A subsample of a subsample inside one batch's releases has no analysis here.
  const auto nested = PrivacyEvent::poisson_sampled(
      0.1, PrivacyEvent::composed({PrivacyEvent::gaussian(1),
                                   PrivacyEvent::poisson_sampled(0.5, PrivacyEvent::gaussian(1))}));
  EXPECT_NE(non_gaussian_reason(nested).find("cannot evaluate a Poisson-subsampled Composed"), std::string::npos);
  EXPECT_THROW(gaussian_steps(nested), std::invalid_argument);
  const auto huge = PrivacyEvent::self_composed(
      PrivacyEvent::self_composed(PrivacyEvent::gaussian(1), std::int64_t{1} << 40), std::int64_t{1} << 40);
  EXPECT_THROW(gaussian_steps(huge), std::invalid_argument);  // would wrap and under-report
}
