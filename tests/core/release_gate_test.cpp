// The release gate (core/release/): a published guarantee comes from the ledgers the runs wrote, re-checked
// against the plan, with every caveat; each test is one of the privacy audit's findings (issue 50) as a probe.
#include "release/privacy_statement.hpp"
#include "release/run_export.hpp"
#include "release/sweep_statement.hpp"

#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <sstream>

namespace privdiff::core::release {
namespace {

using sdk::PrivacyEvent;

PrivacyEvent dp_sgd(double sigma, std::int64_t steps) {
  return PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.05, PrivacyEvent::gaussian(sigma)), steps);
}

sdk::PrivacyLedger ledger_of(const PrivacyEvent& event, std::vector<std::string> caveats = {}) {
  sdk::PrivacyLedger ledger;
  ledger.record(event);
  for (const auto& c : caveats) ledger.add_caveat(c);
  return ledger;
}

// A sweep planned for candidates of 3 steps at sigma 2 (the budget is what that candidate spends).
SweepState planned_sweep(sdk::selection::CandidateCount::Kind kind) {
  SweepState s;
  s.count.kind = kind;
  s.delta = 1e-5;
  const auto& orders = sdk::rdp::default_orders();
  const auto best = sdk::selection::best_budget(s.count, sdk::selection::candidate_curve(dp_sgd(2.0, 3), orders), s.delta,
                                                sdk::rdp::Conversion::improved);
  s.budget = best.budget;
  s.epsilon = best.epsilon;
  s.target_epsilon = best.epsilon * 1.01;
  s.candidates.resize(2);
  for (auto& c : s.candidates) c.done = true, c.score = 0.5;
  return s;
}

std::vector<CandidateRecord> records(const std::vector<sdk::PrivacyLedger>& ledgers) {
  std::vector<CandidateRecord> out;
  for (std::size_t i = 0; i < ledgers.size(); ++i) out.push_back({i, ledgers[i], {}});
  return out;
}

std::string refusal(const SweepState& s, const std::vector<CandidateRecord>& r) {
  try {
    sweep_statement(s, r);
  } catch (const ReleaseRefused& e) {
    return e.what();
  }
  return "";
}

TEST(ReleaseGate, ASweepWithinItsPlanIsReleasedWithItsEpsilon) {
  for (auto kind : {sdk::selection::CandidateCount::Kind::truncated_negative_binomial,
                    sdk::selection::CandidateCount::Kind::poisson, sdk::selection::CandidateCount::Kind::fixed}) {
    const SweepState s = planned_sweep(kind);
    const PrivacyStatement st = sweep_statement(s, records({ledger_of(dp_sgd(2.0, 3)), ledger_of(dp_sgd(2.5, 3))}));
    EXPECT_DOUBLE_EQ(st.epsilon, s.epsilon);
    EXPECT_TRUE(st.is_private);
  }
}

// Finding 1: a candidate run from an edited recipe (steps 3 -> 6) spent twice its budget; the plan's
// epsilon was released. The gate refuses, and says what the search did cost.
TEST(ReleaseGate, RefusesACandidateThatSpentMoreThanPlanned) {
  const SweepState s = planned_sweep(sdk::selection::CandidateCount::Kind::truncated_negative_binomial);
  const std::string why = refusal(s, records({ledger_of(dp_sgd(2.0, 3)), ledger_of(dp_sgd(2.0, 6))}));
  ASSERT_NE(why.find("candidate run(s) 1 spent more than the sweep planned"), std::string::npos) << why;
  EXPECT_NE(why.find("nothing is released"), std::string::npos) << why;
  // The true cost, by the same theorem for candidates of 6 steps, is stated.
  const auto& orders = sdk::rdp::default_orders();
  const double actual = sdk::selection::best_budget(s.count, sdk::selection::candidate_curve(dp_sgd(2.0, 6), orders),
                                                    s.delta, sdk::rdp::Conversion::improved).epsilon;
  EXPECT_GT(actual, s.epsilon);
  std::ostringstream text;
  text.precision(7);
  text << actual;
  EXPECT_NE(why.find("costs epsilon " + text.str()), std::string::npos) << why << " vs " << text.str();
}

// Finding 2: a candidate scored by an evaluator that read the training split (benchmark_classifiers'
// selection = "real", or reference = "training").
TEST(ReleaseGate, RefusesAScoreFittedToTheTrainingData) {
  const SweepState s = planned_sweep(sdk::selection::CandidateCount::Kind::truncated_negative_binomial);
  auto r = records({ledger_of(dp_sgd(2.0, 3)), ledger_of(dp_sgd(2.0, 3))});
  r[1].evals.push_back({{"eval", 0}, {"counts", {{"samples", 20}, {"real_train", 100}}}});
  EXPECT_NE(refusal(s, r).find("fitted to the private training data"), std::string::npos);
  r[1].evals = {{{"eval", 0}, {"caveats", {"scored against the run's own training data (train split)"}}}};
  EXPECT_NE(refusal(s, r).find("fitted to the private training data"), std::string::npos);
}

// Finding 3: every candidate's caveats reach the release, without their candidates/N.
TEST(ReleaseGate, TheReleaseCarriesTheUnionOfTheCandidatesCaveats) {
  const SweepState s = planned_sweep(sdk::selection::CandidateCount::Kind::poisson);
  const PrivacyStatement st = sweep_statement(
      s, records({ledger_of(dp_sgd(2.0, 3), {"secure_noise = false: noise from a seed"}),
                  ledger_of(dp_sgd(2.0, 3), {"init_from_disjoint: the user states ... (/x/candidates/1/run)"})}));
  auto has = [&](const std::string& part) {
    return std::any_of(st.caveats.begin(), st.caveats.end(), [&](const auto& c) { return c.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has("selected by privdiff sweep"));
  EXPECT_TRUE(has("secure_noise = false"));
  EXPECT_TRUE(has("init_from_disjoint"));
  EXPECT_FALSE(has("candidates/1"));
  const auto json = sweep_privacy_json(s, st);
  EXPECT_EQ(json["caveats"].size(), st.caveats.size());
}

TEST(ReleaseGate, RefusesAStateWhoseEpsilonDisagreesWithItsBudget) {
  SweepState s = planned_sweep(sdk::selection::CandidateCount::Kind::truncated_negative_binomial);
  s.epsilon *= 0.5;  // sweep.json edited to a smaller epsilon
  EXPECT_NE(refusal(s, records({ledger_of(dp_sgd(2.0, 3)), ledger_of(dp_sgd(2.0, 3))})).find("changed after its plan"),
            std::string::npos);
}

TEST(ReleaseGate, RefusesWhileACandidateIsMissing) {
  const SweepState s = planned_sweep(sdk::selection::CandidateCount::Kind::truncated_negative_binomial);
  EXPECT_NE(refusal(s, records({ledger_of(dp_sgd(2.0, 3))})).find("not every candidate"), std::string::npos);
}

// An accountant that is an approximation, not an upper bound.
class Approximate : public sdk::Accountant {
 public:
  explicit Approximate(bool says_so_in_a_warning) : warning_(says_so_in_a_warning) {}
  std::string cannot_evaluate(const PrivacyEvent&) const override { return ""; }
  sdk::EpsilonResult epsilon(const PrivacyEvent&, double) const override {
    sdk::EpsilonResult r;
    r.epsilon = 1.5;
    if (warning_) r.warnings.push_back("CLT approximation: not an upper bound");
    return r;
  }
  double delta(const PrivacyEvent&, double) const override { return 1e-6; }
  bool is_upper_bound() const override { return warning_; }  // the warning-only plugin leaves the default

 private:
  bool warning_;
};

// Finding 5: a guarantee by an approximation is refused unless opted into, and then carries a caveat.
TEST(ReleaseGate, AnApproximateAccountantsGuaranteeNeedsTheOptInAndCarriesACaveat) {
  for (bool by_warning : {false, true}) {
    const Approximate approx(by_warning);
    const sdk::PrivacyLedger ledger = ledger_of(dp_sgd(2.0, 3));
    EXPECT_THROW(run_statement(ledger, {{"clt", &approx}}, 1e-5, false), ReleaseRefused);
    const PrivacyStatement st = run_statement(ledger, {{"clt", &approx}}, 1e-5, true);
    ASSERT_EQ(st.caveats.size(), 1u);
    EXPECT_NE(st.caveats[0].find("does not certify an upper bound"), std::string::npos);
    EXPECT_EQ(st.results[0].value("upper_bound", true), false);
  }
}

}  // namespace
}  // namespace privdiff::core::release

// An export's statement (issue 50): the one summary.json holds, checked against the ledger the run wrote.
namespace privdiff::core::release {

TEST(ReleaseGate, AnExportsStatementIsCheckedAgainstTheRunsLedger) {
  const auto dir = std::filesystem::temp_directory_path() / ("privdiff-export-gate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  sdk::PrivacyLedger ledger;
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(1.0)), 2);
  ledger.add_caveat("secure_noise = false: reproducible noise");
  const auto write = [&](const sdk::PrivacyLedger& l) { std::ofstream(dir / "ledger.json") << sdk::to_json(l); };
  write(ledger);
  const nlohmann::json summary = {{"privacy", {{{"accountant", "rdp"}, {"epsilon", 1.5}}}},
                                  {"calibration_accountant", "rdp"}, {"delta", 1e-5}, {"ledger_steps", 2},
                                  {"caveats", nlohmann::json::array()}};
  std::ofstream(dir / "summary.json") << summary.dump();

  nlohmann::json p = run_export_statement(dir);
  EXPECT_TRUE(p["private"].get<bool>());
  EXPECT_EQ(p["epsilon"]["rdp"].get<double>(), 1.5);
  ASSERT_EQ(p["caveats"].size(), 1u);  // the ledger's caveat, which the summary lacked, joins
  EXPECT_EQ(p["caveats"][0], "secure_noise = false: reproducible noise");
  EXPECT_TRUE(p.contains("ledger"));

  // The run went on after its statement: the export is refused, saying so.
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(1.0)), 1);
  write(ledger);
  try {
    run_export_statement(dir);
    ADD_FAILURE() << "a ledger with steps the statement does not cover was exported";
  } catch (const ReleaseRefused& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 steps, but the statement in summary.json covers 2"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(dir / "summary.json");
  EXPECT_THROW(run_export_statement(dir), std::runtime_error);  // not finished
  std::filesystem::remove_all(dir);
}

}  // namespace privdiff::core::release
