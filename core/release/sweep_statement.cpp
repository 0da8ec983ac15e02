#include "release/sweep_statement.hpp"

#include <privdiff/privacy/rdp.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

namespace privdiff::core::release {

namespace {

using nlohmann::json;
using sdk::selection::CandidateCount;
const auto conversion = sweep_conversion;
const auto delta_hat_source = sweep_delta_hat_source;

std::string text(double v) {
  std::ostringstream out;
  out.precision(7);
  out << v;
  return out.str();
}

// A caveat of one candidate, as the release may state it: a candidate's directory (candidates/N) would
// tell that K > N, so it is named without its number.
std::string without_candidate_number(const std::string& caveat) {
  static const std::regex numbered("candidates/[0-9]+");
  return std::regex_replace(caveat, numbered, "candidates/(one of them)");
}

// Why a candidate's [[eval]] results are not a score the selection may use: they read the private
// training data without noise (reference = "training", or an evaluator option such as
// benchmark_classifiers' selection = "real"). Empty when they did not.
std::string private_scoring(const std::vector<json>& evals) {
  for (const auto& result : evals) {
    const json caveats = result.value("caveats", json::array());
    const bool read_train = result.contains("counts") && result["counts"].contains("real_train");
    if (caveats.empty() && !read_train) continue;
    std::string why = "eval-" + std::to_string(result.value("eval", 0)) + ".json";
    for (const auto& c : caveats) why += ": " + (c.is_string() ? c.get<std::string>() : c.dump());
    if (caveats.empty()) why += ": an evaluator read the training split";
    return why;
  }
  return "";
}

void check_recorded_guarantee(const SweepState& s) {
  const double epsilon = sdk::selection::selection_epsilon(s.count, s.budget, s.delta, conversion);
  if (!(std::abs(epsilon - s.epsilon) <= 1e-9 * std::max(1.0, epsilon))) {
    throw ReleaseRefused("sweep.json records epsilon " + text(s.epsilon) + ", but its budget and count give " +
                         text(epsilon) + ": the sweep's state was changed after its plan; nothing is released");
  }
  if (!(epsilon <= s.target_epsilon * (1 + 1e-12))) {
    throw ReleaseRefused("the sweep's epsilon " + text(epsilon) + " is over its target " + text(s.target_epsilon) +
                         "; nothing is released");
  }
}

// Every candidate within the budget; otherwise refused with what the search did cost.
void check_budgets(const SweepState& s, const std::vector<CandidateRecord>& records) {
  const auto& orders = sdk::rdp::default_orders();
  std::vector<std::size_t> over;
  double at_order = 0;  // the first over-spender's RDP at the budget's order
  sdk::selection::CandidateCurve worst{orders, std::vector<double>(orders.size(), 0.0), {}};
  for (const auto& r : records) {
    const sdk::PrivacyEvent spent = r.ledger.total();
    if (const std::string why = sdk::rdp::cannot_evaluate(spent); !why.empty()) {
      throw ReleaseRefused("candidate " + std::to_string(r.index) + "'s ledger holds events the RDP accountant cannot "
                           "evaluate (" + why + "); the selection theorem needs its RDP");
    }
    const auto curve = sdk::selection::candidate_curve(spent, orders);
    for (std::size_t k = 0; k < orders.size(); ++k) worst.rdp[k] = std::max(worst.rdp[k], curve.rdp[k]);
    if (sdk::selection::within_budget(s.count, s.budget, spent, orders, conversion, delta_hat_source)) continue;
    if (over.empty()) at_order = sdk::rdp::event_rdp(spent, {s.budget.order}).front();
    over.push_back(r.index);
  }
  if (over.empty()) return;
  const auto actual = sdk::selection::best_budget(s.count, worst, s.delta, conversion);
  std::string which;
  for (auto i : over) which += (which.empty() ? "" : ", ") + std::to_string(i);
  throw ReleaseRefused(
      "candidate run(s) " + which + " spent more than the sweep planned for each: RDP " + text(at_order) + " at order " +
      text(s.budget.order) + " against a budget of " + text(s.budget.rdp) + " (the recipe, its overrides or its data "
      "changed between the sweep's plan and the run). The search then costs epsilon " + text(actual.epsilon) + " at delta " +
      text(s.delta) + " by the same theorem, not the planned " + text(s.epsilon) + "; nothing is released. Keep the "
      "sweep directory private, and start a new sweep for a release");
}

}  // namespace

std::string selection_theorem(const CandidateCount& c) {
  if (c.kind == CandidateCount::Kind::truncated_negative_binomial) {
    return "Papernot & Steinke 2022, Theorem 2 (RDP), converted at its order";
  }
  if (c.kind == CandidateCount::Kind::poisson) return "Papernot & Steinke 2022, Theorem 6 (RDP; delta_hat: the smaller of the RDP and PRV bounds), converted at its order";
  return "composition of the K candidates (a fixed K: no selection theorem applies)";
}

PrivacyStatement sweep_statement(const SweepState& s, const std::vector<CandidateRecord>& records) {
  check_recorded_guarantee(s);
  if (records.size() != s.candidates.size() ||
      std::any_of(s.candidates.begin(), s.candidates.end(), [](const auto& c) { return !c.done; })) {
    throw ReleaseRefused("not every candidate of the sweep has finished and left its ledger (" +
                         std::to_string(records.size()) + " read); continue with privdiff sweep --resume");
  }
  check_budgets(s, records);
  PrivacyStatement st;
  st.is_private = true;
  st.epsilon = s.epsilon;
  st.delta = s.delta;
  st.accountant = "rdp";
  st.add_caveat("selected by privdiff sweep: the guarantee is the sweep's; K, the other candidates and their scores are "
                "not released (the theorem does not cover them)");
  if (s.seed) {
    st.add_caveat("K and the candidates were drawn from --seed " + std::to_string(*s.seed) +
                  ": whoever knows the seed knows K, and the theorem's bound does not hold against them");
  }
  for (const auto& r : records) {
    if (const std::string why = private_scoring(r.evals); !why.empty()) {
      throw ReleaseRefused("a candidate's score was fitted to the private training data (" + without_candidate_number(why) +
                           "): the choice among the candidates would be a noise-free function of private records, "
                           "which no selection theorem covers; nothing is released. Score on held-out data only "
                           "([[eval]] reference = \"held_out\", and no evaluator option that reads the training split, "
                           "e.g. benchmark_classifiers selection = \"synthetic\")");
    }
    for (const auto& caveat : r.ledger.caveats()) st.add_caveat("a candidate run: " + without_candidate_number(caveat));
  }
  st.results = json::array({{{"accountant", "rdp (private selection)"}, {"epsilon", s.epsilon}, {"order", s.budget.order}}});
  return st;
}

json sweep_privacy_json(const SweepState& s, const PrivacyStatement& st) {
  return {{"private", true},
          {"epsilon", st.epsilon},
          {"delta", st.delta},
          {"accountant", st.accountant},
          {"mechanism", "the best of K candidate runs, K ~ " + describe_count(s.count)},
          {"theorem", selection_theorem(s.count)},
          {"budget", to_json(s.budget)},
          {"candidate_draws", s.seed ? "seeded (--seed)" : "secure (the OS's randomness, not kept)"},
          {"verified", "every candidate's ledger was read and found within the budget before the release"},
          {"caveats", st.caveats}};
}

void apply_to_export(ModelExport& e, const SweepState& s, const PrivacyStatement& st) {
  const json statement = sweep_privacy_json(s, st);
  e.metadata[export_keys::epsilon] = std::to_string(st.epsilon);
  e.metadata[export_keys::delta] = std::to_string(st.delta);
  e.metadata[export_keys::accountant] = "rdp (private selection)";
  e.metadata[export_keys::privacy] = statement.dump();
  std::string caveats;
  for (const auto& c : st.caveats) caveats += "- " + c + "\n";
  std::ostringstream guarantee;
  guarantee << "## Privacy guarantee\n\n(ε, δ) = (" << text(st.epsilon) << ", " << text(st.delta) << ")-differential "
            << "privacy at the level of one example, for the whole search: " << statement["mechanism"].get<std::string>()
            << ", by " << statement["theorem"].get<std::string>() << ". It covers the hyperparameters, chosen by the "
            << "sweep in a search space fixed before it ran; the figures of the run that trained the model alone do "
            << "not hold for this release.\n\nCaveats:\n" << caveats << "\nThe same guarantee is in the file's "
            << "metadata (`privdiff.epsilon`, `privdiff.delta`, `privdiff.accountant`, and `privdiff.privacy`): keep "
            << "it with the weights.\n\n";
  // The run's card: its title line and its guarantee section give way to the sweep's.
  const std::string& card = e.model_card;
  const auto body = card.find('\n') == std::string::npos ? card.size() : card.find('\n') + 1;
  const auto from = card.find("## Privacy guarantee"), to = card.find("## Loading it");
  const bool sections = from != std::string::npos && to != std::string::npos && body <= from && from < to;
  e.model_card = "# A model selected by privdiff sweep\n" + (sections ? card.substr(body, from - body) : "\n") +
                 guarantee.str() + (sections ? card.substr(to) : std::string());
}

}  // namespace privdiff::core::release
