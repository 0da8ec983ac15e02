#include <privdiff/privacy/event.hpp>
#include <privdiff/privacy/event_json.hpp>
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
}
