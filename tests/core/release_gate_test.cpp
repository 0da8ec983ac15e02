// The release gate (core/release/): a published guarantee comes from the ledgers the runs wrote, re-checked
// against the plan, with every caveat; each test is one of the privacy audit's findings (issue 50) as a probe.
#include "release/ledger_agreement.hpp"
#include "release/privacy_statement.hpp"
#include "release/run_export.hpp"
#include "release/sweep_statement.hpp"
#include "util/content_hash.hpp"

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

// An export's statement (issue 50; issue 67, finding 4): every privacy figure is the gate's statement of the
// run's ledger, never summary.json's (a summary that says 0.01 does not make the export say it).
namespace privdiff::core::release {

TEST(ReleaseGate, AnExportsEpsilonIsTheLedgersNotTheSummarys) {
  const auto dir = std::filesystem::temp_directory_path() / ("privdiff-export-gate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  sdk::PrivacyLedger ledger;
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(1.0)), 2);
  ledger.add_caveat("secure_noise = false: reproducible noise");
  const nlohmann::json summary = {{"privacy", {{{"accountant", "rdp"}, {"epsilon", 0.01}}}},
                                  {"calibration_accountant", "rdp"}, {"delta", 0.5}, {"ledger_steps", 2},
                                  {"data", "tiny"}, {"caveats", {"a caveat only summary.json has"}}};
  std::ofstream(dir / "summary.json") << summary.dump();
  PrivacyStatement st;
  st.is_private = true;
  st.epsilon = 9.989;
  st.delta = 1e-5;
  st.accountant = "rdp";
  st.results = {{{"accountant", "rdp"}, {"epsilon", 9.989}}, {{"accountant", "prv"}, {"epsilon", 9.5}}};
  st.caveats = ledger.caveats();

  nlohmann::json p = run_export_statement(dir, st, ledger);
  EXPECT_TRUE(p["private"].get<bool>());
  EXPECT_EQ(p["accountant"], "rdp");
  EXPECT_EQ(p["epsilon"]["rdp"].get<double>(), 9.989);
  EXPECT_EQ(p["epsilon"]["prv"].get<double>(), 9.5);
  EXPECT_EQ(p["delta"].get<double>(), 1e-5);
  EXPECT_EQ(p["ledger_steps"].get<std::int64_t>(), 2);
  EXPECT_EQ(p["data"], "tiny");
  ASSERT_EQ(p["caveats"].size(), 2u);  // the statement's, and summary.json's joined (never fewer)
  EXPECT_EQ(p["caveats"][0], "secure_noise = false: reproducible noise");
  EXPECT_EQ(sdk::privacy_ledger_from_json(p["ledger"].dump()).entries(), ledger.entries());

  // A ledger that spent privacy with no epsilon for it (no accountant could evaluate it) is not exported.
  PrivacyStatement none;
  EXPECT_THROW(run_export_statement(dir, none, ledger), ReleaseRefused);

  // The run went on after its statement: the export is refused, saying so.
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(1.0)), 1);
  try {
    run_export_statement(dir, st, ledger);
    ADD_FAILURE() << "a ledger with steps the run's summary does not cover was exported";
  } catch (const ReleaseRefused& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 steps, but the statement in summary.json covers 2"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(dir / "summary.json");
  EXPECT_THROW(run_export_statement(dir, st, ledger), std::runtime_error);  // not finished
  std::filesystem::remove_all(dir);
}

// Issue 67, finding 4: ledger.json and checkpoint.pt's ledger are one history; they may differ only by
// steps one of them has not recorded yet. Any other difference (sigma, q, count, kind) is refused.
LedgerCopy copy_of(const char* file, const std::vector<PrivacyEvent>& entries) {
  LedgerCopy c{std::string("/runs/r/") + file, {}};
  for (const auto& e : entries) c.ledger.record(e);
  return c;
}

TEST(ReleaseGate, TheRunsTwoLedgersMustAgreeInEveryEvent) {
  const PrivacyEvent step = PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(1.1));
  const PrivacyEvent release = PrivacyEvent::gaussian(5.0);
  const auto agreed = [&](const std::vector<PrivacyEvent>& json, const std::vector<PrivacyEvent>& checkpoint) {
    return agreed_ledger(copy_of("ledger.json", json), copy_of("checkpoint.pt", checkpoint));
  };
  // The same events; one ahead of the other (in a run of steps, or by whole entries): the longer is the ledger.
  EXPECT_EQ(agreed({release, step, step}, {release, step, step}).note, "");
  const AgreedLedger ahead = agreed({release, step, step, step}, {release, step});
  EXPECT_EQ(ahead.ledger.steps(), 4);
  EXPECT_NE(ahead.note.find("ledger.json records 2 step(s) beyond checkpoint.pt"), std::string::npos) << ahead.note;
  EXPECT_EQ(agreed({release}, {release, step, step}).ledger.steps(), 3);
  EXPECT_EQ(agreed({}, {release}).ledger.steps(), 1);
  EXPECT_EQ(agreed_ledger(std::nullopt, copy_of("checkpoint.pt", {step})).ledger.steps(), 1);

  const PrivacyEvent sigma_100x = PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(110));
  const PrivacyEvent other_q = PrivacyEvent::poisson_sampled(0.02, PrivacyEvent::gaussian(1.1));
  const std::vector<std::pair<std::vector<PrivacyEvent>, std::vector<PrivacyEvent>>> disagreeing = {
      {{sigma_100x, sigma_100x}, {step, step}},            // every sigma x100 (the audit's probe)
      {{other_q, other_q}, {step, step}},                  // q
      {{step, release}, {step, step, release}},            // a count, before the last entry
      {{release, step}, {step, step}},                     // a kind
      {{step, step, release}, {step, step, step, release}},
      {{step, release, step}, {step, release}}};           // (that one agrees: checkpoint.pt is behind)
  for (std::size_t i = 0; i + 1 < disagreeing.size(); ++i) {
    try {
      agreed(disagreeing[i].first, disagreeing[i].second);
      ADD_FAILURE() << "case " << i << ": disagreeing ledgers were reconciled";
    } catch (const ReleaseRefused& e) {
      const std::string why = e.what();
      EXPECT_EQ(why.rfind("/runs/r/ledger.json and /runs/r/checkpoint.pt disagree about what the run spent: entry ", 0), 0u)
          << why;
      EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    }
  }
  EXPECT_EQ(agreed(disagreeing.back().first, disagreeing.back().second).ledger.steps(), 3);
}

// Issue 67, finding 8: a checkpoint is published only beside the recipe it was trained under.
TEST(ReleaseGate, ACheckpointIsTheRunsOnlyUnderTheRecipeItRecorded) {
  const std::string recipe = "[run]\nseed = 1\n";
  EXPECT_NO_THROW(check_checkpoint_recipe("/r/checkpoint.pt", content_hash(recipe), "/r/recipe.toml", recipe));
  EXPECT_NO_THROW(check_checkpoint_recipe("/r/checkpoint.pt", "", "/r/recipe.toml", recipe));  // none recorded
  try {
    check_checkpoint_recipe("/r/checkpoint.pt", content_hash(recipe), "/r/recipe.toml", recipe + "# edited\n");
    ADD_FAILURE() << "an edited recipe was accepted";
  } catch (const ReleaseRefused& e) {
    EXPECT_NE(std::string(e.what()).find("/r/checkpoint.pt was trained under a recipe with hash " + content_hash(recipe) +
                                         ", but /r/recipe.toml has hash"), std::string::npos) << e.what();
  }
}

}  // namespace privdiff::core::release
