// privdiff's accountants against the reference libraries themselves: Google's dp-accounting (RDP and
// PLD accountants), Microsoft's prv-accountant and Opacus (RDP and PRV accountants), on DPDM's,
// DP-LDM's and DP-FETA's schedules, composed events (DP-FETA's central images + DP-SGD) and noise
// calibration. The fixtures (tests/fixtures/accountants/reference_*.csv) were written by
// scripts/generate_reference_accountant_fixtures.py with the pinned library versions it names.
//
// Tolerances, and where they come from:
//  * RDP. Same orders and the same conversion (Balle et al. 2020 Thm 21, which both libraries use):
//    Opacus keeps the signs of the fractional-order series, as privdiff does, so the two agree to
//    1e-9 relative. dp-accounting (since 2024) adds |C(alpha, i)| in that series: an upper bound,
//    up to 0.2% above the exact value here, so privdiff <= dp-accounting at fractional orders, and
//    equal (1e-9) where privdiff's optimal order is an integer. Every RDP row carries the exact
//    epsilon at the library's optimal order (mpmath, 50 digits): that decides who is right.
//    privdiff's default orders contain both libraries' lists, so its default epsilon is never above
//    either library's.
//  * PRV (prv-accountant, Opacus's port of it): both state lower <= true epsilon <= upper with
//    upper = estimate(delta - delta_error) + eps_error, eps_error 0.01 and delta_error delta/1000
//    here (privdiff's defaults too). Two correct accountants' intervals must overlap, and each
//    estimate must lie in the other's interval.
//  * PLD (dp-accounting): its pessimistic estimate (connect the dots) is an upper bound on the true
//    epsilon; its optimistic one (privacy buckets) a lower bound, off by up to one discretisation
//    interval (1e-4) per composition. privdiff's [lower, upper] must meet [optimistic, pessimistic];
//    privdiff's estimate must be within its own eps_error of the pessimistic value; and privdiff's
//    upper bound must cover the add direction, which dp-accounting evaluates and privdiff (like
//    prv-accountant and Opacus) does not.
//  * Calibration: privdiff's calibrate_noise_multiplier never returns a sigma whose epsilon is above
//    the target (Opacus issue #346), with any accountant. Each reference sigma is checked in epsilon
//    space with privdiff's accountant: it must meet the target within the library's stated
//    calibration tolerance (Opacus: epsilon_tolerance 0.01; prv-accountant: upper(sigma) <
//    target + eps_error; dp-accounting: sigma within 1e-6 of its own root) plus the epsilon
//    agreement above; and privdiff's sigma is compared with the reference's through that.
#include "../test_csv.hpp"
#include "installed_plugins.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/engine/central_images.hpp>
#include <privdiff/privacy/calibration.hpp>
#include <privdiff/privacy/ledger.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace privdiff;
using namespace privdiff::sdk;
using privdiff::testing::CsvRow;
using privdiff::testing::num;

namespace {

std::vector<CsvRow> fixture(const std::string& name) {
  return privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/accountants/" + name);
}

std::unique_ptr<Accountant> make(const std::string& id, std::map<std::string, ConfigValue> values = {}) {
  return privdiff::testing::make_installed<Accountant>(id, std::move(values));
}

std::unique_ptr<Accountant> rdp_with_orders(const std::vector<double>& orders) {
  return make("rdp", {{"orders", orders}});
}

// The integer orders of privdiff's default list (2, ..., 64, 80, ..., 1024): where RDP is an exact binomial sum.
std::vector<double> integer_default_orders() {
  std::vector<double> orders;
  for (double a : rdp::default_orders()) {
    if (a == std::floor(a)) orders.push_back(a);
  }
  return orders;
}

// `q:sigma:steps` joined by `+`; a sigma of `*` is `star` (the calibrated multiplier).
struct Part {
  double q, sigma;
  std::int64_t steps;
};
std::vector<Part> parse_parts(const std::string& text, double star = std::numeric_limits<double>::quiet_NaN()) {
  std::vector<Part> parts;
  std::istringstream all(text);
  std::string item;
  while (std::getline(all, item, '+')) {
    std::istringstream fields(item);
    std::string q, sigma, steps;
    std::getline(fields, q, ':');
    std::getline(fields, sigma, ':');
    std::getline(fields, steps, ':');
    parts.push_back({std::stod(q), sigma == "*" ? star : std::stod(sigma), std::stoll(steps)});
  }
  return parts;
}

// The event as a privdiff run's ledger holds it: each DP-SGD step recorded as
// PoissonSampled(q, Gaussian(sigma)), run-length compressed into SelfComposed(step, steps); in a
// DP-FETA run the central-image queries come first, recorded by the central_images mechanism's
// own event (engine::central_query_event) once per query.
PrivacyEvent event_of(const std::vector<Part>& parts, bool central_images_first = false) {
  PrivacyLedger ledger;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& p = parts[i];
    if (i == 0 && central_images_first) {
      engine::CentralImageOptions options;
      options.queries = p.steps;
      options.sampling_rate = p.q;
      options.noise_multiplier = p.sigma;
      EXPECT_EQ(engine::central_images_event(options),
                PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(p.q, PrivacyEvent::gaussian(p.sigma)), p.steps));
      for (std::int64_t k = 0; k < p.steps; ++k) ledger.record(engine::central_query_event(options));
    } else {
      ledger.record(PrivacyEvent::poisson_sampled(p.q, PrivacyEvent::gaussian(p.sigma)), p.steps);
    }
  }
  return ledger.total();
}

// DP-FETA's scenarios (dpfeta_*) start with the central images.
PrivacyEvent event_of(const CsvRow& row, double star = std::numeric_limits<double>::quiet_NaN()) {
  return event_of(parse_parts(row.at("events"), star), row.at("scenario").rfind("dpfeta_", 0) == 0);
}

double detail_of(const EpsilonResult& r, const std::string& key) {
  for (const auto& [k, v] : r.details) {
    if (k == key) return v;
  }
  throw std::runtime_error("no detail " + key);
}

std::vector<double> library_orders(const std::string& library) {
  for (const auto& row : fixture("reference_rdp_orders.csv")) {
    if (row.at("library") != library) continue;
    std::vector<double> orders;
    std::istringstream s(row.at("orders"));
    for (double a; s >> a;) orders.push_back(a);
    return orders;
  }
  throw std::runtime_error("no orders for " + library);
}

std::vector<CsvRow> rows_of(const std::string& file, const std::string& library, const std::string& accountant,
                            const std::string& column = "accountant") {
  std::vector<CsvRow> out;
  for (const auto& row : fixture(file)) {
    if (row.at("library") == library && row.at(column) == accountant) out.push_back(row);
  }
  return out;
}

std::string where(const CsvRow& row) { return row.at("scenario") + " [" + row.at("events") + "] delta=" + row.at("delta"); }

// The largest difference seen in one comparison, printed at the end of a test (for the record).
struct Largest {
  explicit Largest(std::string what_) : what(std::move(what_)) {}
  Largest(const Largest&) = delete;
  Largest& operator=(const Largest&) = delete;
  std::string what;
  double abs = 0, rel = 0;
  std::string at_abs, at_rel;
  void add(double privdiff, double reference, const std::string& at) {
    const double a = std::fabs(privdiff - reference), r = a / std::max(std::fabs(reference), 1e-300);
    if (a > abs) abs = a, at_abs = at;
    if (r > rel) rel = r, at_rel = at;
  }
  ~Largest() {
    std::cout << "[ largest  ] " << what << ": abs " << std::setprecision(3) << abs << " (" << at_abs << "), rel "
              << rel << " (" << at_rel << ")\n";
  }
};

}  // namespace

TEST(AccountantReferences, FixturesCoverEveryLibraryOnEveryScenario) {
  const auto rows = fixture("reference_accountants.csv");
  std::map<std::string, std::set<std::string>> seen;
  for (const auto& row : rows) seen[row.at("scenario")].insert(row.at("library") + "/" + row.at("accountant"));
  EXPECT_GE(seen.size(), 25u);
  const std::set<std::string> all{"dp-accounting/rdp", "dp-accounting/pld", "opacus/rdp", "opacus/prv",
                                  "prv-accountant/prv"};
  for (const auto& [scenario, libraries] : seen) EXPECT_EQ(libraries, all) << scenario;
  for (const auto& row : rows) {
    const std::string v = row.at("version"), lib = row.at("library");
    EXPECT_EQ(v, lib == "dp-accounting" ? "0.6.0" : lib == "opacus" ? "1.6.0" : "0.2.0") << lib;
  }
  // privdiff's default orders contain both libraries' lists (so its default epsilon is never above theirs).
  const auto& defaults = rdp::default_orders();
  for (const std::string lib : {"dp-accounting", "opacus"}) {
    for (double a : library_orders(lib)) {
      EXPECT_NE(std::find(defaults.begin(), defaults.end(), a), defaults.end()) << lib << " order " << a;
    }
  }
}

// Opacus: same series (signs kept), same conversion. With Opacus's orders privdiff gives Opacus's
// epsilon and optimal order; at that order both equal the exact (mpmath) epsilon.
TEST(AccountantReferences, RdpMatchesOpacusToRoundOff) {
  auto acc = rdp_with_orders(library_orders("opacus"));
  auto defaults = make("rdp");
  Largest vs_opacus{"rdp vs opacus rdp (opacus orders)"}, vs_exact{"rdp vs mpmath at opacus's optimal order"};
  for (const auto& row : rows_of("reference_accountants.csv", "opacus", "rdp")) {
    const auto event = event_of(row);
    const double delta = num(row, "delta"), reference = num(row, "epsilon"), order = num(row, "order");
    const auto r = acc->epsilon(event, delta);
    EXPECT_NEAR(r.epsilon, reference, 1e-9 * reference) << where(row);
    EXPECT_EQ(detail_of(r, "optimal_order"), order) << where(row);
    vs_opacus.add(r.epsilon, reference, row.at("scenario"));
    const double at_order = rdp_with_orders({order})->epsilon(event, delta).epsilon, exact = num(row, "epsilon_exact_at_order");
    EXPECT_NEAR(at_order, exact, 1e-9 * exact) << where(row) << " order " << order;
    vs_exact.add(at_order, exact, row.at("scenario"));
    // privdiff's default orders (a superset) can only do better, e.g. above Opacus's largest order 63.
    EXPECT_LE(defaults->epsilon(event, delta).epsilon, reference * (1 + 1e-9)) << where(row);
  }
}

// dp-accounting: same conversion, but its fractional-order series adds |C(alpha, i)|: an upper
// bound. privdiff is never above it, equal where privdiff's optimum is an integer order, and at
// dp-accounting's optimal order privdiff is the exact value while dp-accounting is above it.
TEST(AccountantReferences, RdpMatchesDpAccountingAtIntegerOrdersAndIsBelowItAtFractionalOnes) {
  auto acc = rdp_with_orders(library_orders("dp-accounting"));
  auto defaults = make("rdp");
  Largest integer{"rdp vs dp-accounting rdp where privdiff's optimal order is an integer"},
      fractional{"rdp vs dp-accounting rdp where privdiff's optimal order is fractional"},
      vs_exact{"rdp vs mpmath at dp-accounting's optimal order"},
      dpa_vs_exact{"dp-accounting rdp vs mpmath at its optimal order (its own error)"};
  int fractional_rows = 0;
  for (const auto& row : rows_of("reference_accountants.csv", "dp-accounting", "rdp")) {
    const auto event = event_of(row);
    const double delta = num(row, "delta"), reference = num(row, "epsilon"), order = num(row, "order");
    const double exact = num(row, "epsilon_exact_at_order");
    const auto r = acc->epsilon(event, delta);
    const double best = detail_of(r, "optimal_order");
    EXPECT_LE(r.epsilon, reference * (1 + 1e-9)) << where(row);
    if (best == std::floor(best)) {
      EXPECT_NEAR(r.epsilon, reference, 1e-9 * reference) << where(row);
      integer.add(r.epsilon, reference, row.at("scenario"));
    } else {
      ++fractional_rows;
      fractional.add(r.epsilon, reference, row.at("scenario"));
    }
    const double at_order = rdp_with_orders({order})->epsilon(event, delta).epsilon;
    EXPECT_NEAR(at_order, exact, 1e-9 * exact) << where(row) << " order " << order;
    vs_exact.add(at_order, exact, row.at("scenario"));
    // dp-accounting's own value: exact at integer orders, above the exact one at fractional orders.
    if (order == std::floor(order)) {
      EXPECT_NEAR(reference, exact, 1e-9 * exact) << where(row);
    } else {
      EXPECT_GE(reference, exact * (1 - 1e-12)) << where(row);
    }
    dpa_vs_exact.add(reference, exact, row.at("scenario"));
    EXPECT_LE(defaults->epsilon(event, delta).epsilon, reference * (1 + 1e-9)) << where(row);
  }
  EXPECT_GE(fractional_rows, 5);  // the grid exercises the series where the libraries differ
}

// The RDP accountant from sigma 0.3 to 1e6 (tests/fixtures/accountants/rdp_large_sigma.csv, written by
// scripts/generate_rdp_large_sigma_fixtures.py with dp-accounting 0.6 and mpmath). At large sigma the
// whole schedule's RDP at order 1.1 falls below delta^2 and the KL bound (total variation <= sqrt(1 -
// exp(-KL)), KL <= RDP) gives (0, delta)-DP: epsilon 0 is exact there, not an underflow. dp-accounting
// takes the same branch, but its fractional-order series loses all precision at large sigma (RDP 3.4e-5
// at order 1.1 for sigma 8000, where the exact value is 8.6e-11), so it reaches the branch only at
// integer orders, at a larger sigma. Hence: with the integer orders privdiff equals the exact epsilon
// (mpmath's binomial sums) to 1e-9, and dp-accounting's to 1e-6 wherever dp-accounting's own sum is exact
// (every row but one, where its A - 1 nears 1e-16); with the default orders privdiff is never above
// dp-accounting, and where it is lower the exact RDP at order 1.1 decides.
TEST(AccountantReferences, RdpEqualsDpAccountingFromSigmaPointThreeToAMillion) {
  const auto rows = fixture("rdp_large_sigma.csv");
  ASSERT_GE(rows.size(), 50u);
  auto integer = rdp_with_orders(integer_default_orders());
  auto defaults = make("rdp");
  auto at_1_1 = rdp_with_orders({1.1});
  int kl_rows = 0, below_dpa = 0, dpa_imprecise = 0;
  double smallest = 1e300, largest = 0;
  for (const auto& row : rows) {
    const double q = num(row, "q"), sigma = num(row, "sigma"), delta = num(row, "delta");
    const auto steps = static_cast<std::int64_t>(num(row, "steps"));
    const auto event = PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(q, PrivacyEvent::gaussian(sigma)), steps);
    const std::string at = "q=" + row.at("q") + " steps=" + row.at("steps") + " sigma=" + row.at("sigma");
    smallest = std::min(smallest, sigma), largest = std::max(largest, sigma);
    const double reference = num(row, "dpa_epsilon_integer"), exact = num(row, "exact_epsilon_integer");
    const double mine = integer->epsilon(event, delta).epsilon;
    if (exact == 0) {
      EXPECT_EQ(mine, 0) << at;
    } else {
      EXPECT_NEAR(mine, exact, 1e-9 * exact) << at;
      EXPECT_GT(mine, 0) << at;  // never collapses to 0 where the exact value is positive
    }
    if (reference == exact || std::fabs(reference - exact) <= 1e-6 * exact) {
      EXPECT_NEAR(mine, reference, 1e-6 * reference) << at;
    } else {
      // dp-accounting's own integer-order sum loses precision where A - 1 nears 1e-16 (its value is below
      // the exact one there): the exact value decides.
      ++dpa_imprecise;
      EXPECT_LT(reference, exact) << at;
      std::cout << "[ differs  ] " << at << ": dp-accounting " << reference << ", exact " << exact << ", privdiff " << mine << "\n";
    }
    const double exact_1_1 = num(row, "exact_rdp_1_1");
    EXPECT_NEAR(rdp::event_rdp(event, {1.1}).front(), exact_1_1, 1e-9 * exact_1_1) << at;
    const double full = defaults->epsilon(event, delta).epsilon;
    EXPECT_LE(full, num(row, "dpa_epsilon_default") * (1 + 1e-9)) << at;
    const bool kl = row.at("kl_bound") == "1";
    kl_rows += kl;
    // Epsilon 0 exactly when the exact RDP at order 1.1 puts delta above the KL bound.
    EXPECT_EQ(at_1_1->epsilon(event, delta).epsilon == 0, kl) << at;
    if (kl) {
      EXPECT_EQ(full, 0) << at;
    } else {
      EXPECT_GT(full, 0) << at;
    }
    below_dpa += full < num(row, "dpa_epsilon_default") * (1 - 1e-6);
  }
  EXPECT_EQ(smallest, 0.3);
  EXPECT_EQ(largest, 1e6);
  EXPECT_GE(kl_rows, 8);    // the sweep reaches the KL branch in every schedule
  EXPECT_GE(below_dpa, 2);  // ... and the sigmas where only the exact fractional orders reach it
  EXPECT_LE(dpa_imprecise, 1);  // q 0.001, 10,000 steps, sigma 1e5 (the fixture script's docstring)
}

// Gaussian releases of one Poisson batch, PoissonSampled(q, Composed([Gaussian(s1), Gaussian(s2), ...])) as
// adaptive clipping spends (tests/fixtures/accountants/same_batch_gaussians.csv, written by
// scripts/generate_same_batch_fixtures.py with dp-accounting 0.6): privdiff's RDP accountant equals
// dp-accounting's to 1e-6 at the integer orders, never above it with the default orders; PRV evaluates it
// too, below RDP; and recording the releases as separate PoissonSampled events under-counts (both libraries).
TEST(AccountantReferences, ReleasesOfOneBatchMatchDpAccounting) {
  const auto rows = fixture("same_batch_gaussians.csv");
  ASSERT_GE(rows.size(), 5u);
  auto integer = rdp_with_orders(integer_default_orders());
  auto rdp_default = make("rdp");
  auto prv = make("prv");
  for (const auto& row : rows) {
    const double q = num(row, "q"), delta = num(row, "delta");
    const auto steps = static_cast<std::int64_t>(num(row, "steps"));
    std::vector<PrivacyEvent> releases, separate;
    std::istringstream list(row.at("sigmas"));
    for (std::string sigma; std::getline(list, sigma, ';');) {
      releases.push_back(PrivacyEvent::gaussian(std::stod(sigma)));
      separate.push_back(PrivacyEvent::poisson_sampled(q, PrivacyEvent::gaussian(std::stod(sigma))));
    }
    const auto one_batch = PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(q, PrivacyEvent::composed(releases)), steps);
    const std::string at = "q=" + row.at("q") + " sigmas=" + row.at("sigmas");
    EXPECT_NEAR(integer->epsilon(one_batch, delta).epsilon, num(row, "dpa_epsilon_integer"),
                1e-6 * num(row, "dpa_epsilon_integer")) << at;
    const double mine = rdp_default->epsilon(one_batch, delta).epsilon;
    EXPECT_LE(mine, num(row, "dpa_epsilon_default") * (1 + 1e-9)) << at;
    EXPECT_GE(mine, num(row, "dpa_epsilon_default") * (1 - 0.01)) << at;
    const double separately = rdp_default->epsilon(PrivacyEvent::self_composed(PrivacyEvent::composed(separate), steps), delta).epsilon;
    EXPECT_LT(separately, mine) << at;  // the under-counting form
    EXPECT_LE(num(row, "dpa_epsilon_separate"), num(row, "dpa_epsilon_default")) << at;
    const auto with_prv = prv->epsilon(one_batch, delta);
    EXPECT_TRUE(std::isfinite(with_prv.epsilon)) << at;
    EXPECT_LE(with_prv.epsilon, mine * (1 + 1e-9)) << at;
  }
}

// PRV: prv-accountant and Opacus's port, at privdiff's defaults (eps_error 0.01, delta_error delta/1000).
TEST(AccountantReferences, PrvMatchesPrvAccountantAndOpacusWithinTheirErrorBands) {
  auto prv = make("prv");
  std::map<std::string, EpsilonResult> ours;  // one evaluation per scenario, shared by both libraries
  for (const std::string lib : {"prv-accountant", "opacus"}) {
    Largest estimate{"prv estimate vs " + lib + " estimate"}, upper{"prv upper vs " + lib + " upper"};
    for (const auto& row : rows_of("reference_accountants.csv", lib, "prv")) {
      const double delta = num(row, "delta");
      ASSERT_EQ(num(row, "eps_error"), 0.01);
      ASSERT_DOUBLE_EQ(num(row, "delta_error"), delta / 1000);
      auto it = ours.find(row.at("scenario"));
      if (it == ours.end()) it = ours.emplace(row.at("scenario"), prv->epsilon(event_of(row), delta)).first;
      const auto& r = it->second;
      const double lo = detail_of(r, "epsilon_lower"), est = detail_of(r, "epsilon_estimate"), hi = r.epsilon;
      const double ref_lo = num(row, "epsilon_lower"), ref_est = num(row, "epsilon_estimate"), ref_hi = num(row, "epsilon");
      // Both contain the true epsilon: the intervals meet.
      EXPECT_LE(lo, ref_hi) << where(row);
      EXPECT_LE(ref_lo, hi) << where(row);
      // Each estimate lies in the other's stated band; the library's, in privdiff's widened by the
      // library's own eps_error: privdiff narrows its band where epsilon < 10 eps_error, where the
      // libraries' estimate may sit up to eps_error off (PrivImage's query at sigma 484: 0.0054
      // against the true 0.00456, dp-accounting's PLD 0.00450-0.00456).
      const double ref_error = num(row, "eps_error");
      EXPECT_LE(lo - ref_error, ref_est) << where(row);
      EXPECT_LE(ref_est, hi + ref_error) << where(row);
      EXPECT_LE(ref_lo, est) << where(row);
      EXPECT_LE(est, ref_hi) << where(row);
      estimate.add(est, ref_est, row.at("scenario"));
      // privdiff narrows the band where epsilon < 10 eps_error (the upper bound would be mostly
      // discretisation error); elsewhere the same eps_error, so the upper bounds differ as the estimates.
      if (detail_of(r, "eps_error") == 0.01) upper.add(hi, ref_hi, row.at("scenario"));
    }
  }
}

// PLD (dp-accounting): pessimistic = upper bound, optimistic = lower bound; both directions.
TEST(AccountantReferences, PrvAgreesWithDpAccountingPld) {
  auto prv = make("prv");
  Largest estimate{"prv estimate vs dp-accounting pld (pessimistic)"};
  double add_margin = std::numeric_limits<double>::infinity();
  for (const auto& row : rows_of("reference_accountants.csv", "dp-accounting", "pld")) {
    const double delta = num(row, "delta");
    const auto r = prv->epsilon(event_of(row), delta);
    const double lo = detail_of(r, "epsilon_lower"), est = detail_of(r, "epsilon_estimate"), hi = r.epsilon;
    const double pessimistic = num(row, "epsilon"), optimistic = num(row, "epsilon_lower");
    EXPECT_LE(lo, pessimistic) << where(row);
    EXPECT_LE(optimistic, hi) << where(row);
    EXPECT_NEAR(est, pessimistic, detail_of(r, "eps_error")) << where(row);
    estimate.add(est, pessimistic, row.at("scenario"));
    // privdiff (like prv-accountant and Opacus) evaluates the remove direction; the add direction
    // must be covered too under add/remove adjacency.
    EXPECT_NEAR(pessimistic, std::max(num(row, "epsilon_remove"), num(row, "epsilon_add")), 1e-9 * pessimistic);
    EXPECT_GE(hi, num(row, "epsilon_add")) << where(row);
    EXPECT_GE(num(row, "epsilon_remove"), num(row, "epsilon_add")) << where(row);
    add_margin = std::min(add_margin, hi - num(row, "epsilon_add"));
  }
  std::cout << "[ smallest ] prv upper minus dp-accounting pld add direction: " << add_margin << "\n";
}

// Calibration. The libraries state their calibration tolerance in epsilon (Opacus, prv-accountant)
// or in sigma of their own root (dp-accounting), so the comparison is made in epsilon, with
// privdiff's accountant:
//  * privdiff's sigma never gives an epsilon above the target (Opacus issue #346), and is tight:
//    sigma (1 - 2 tolerance) gives an epsilon above it;
//  * each library's sigma gives an epsilon within the library's stated tolerance of the target,
//    widened by the agreement of the epsilon tests above;
//  * so privdiff's sigma is at most the reference's where privdiff's epsilon there meets the
//    target, and above it where not (epsilon is monotone in sigma).
TEST(AccountantReferences, CalibrationNeverOvershootsAndMatchesTheReferences) {
  const auto rows = fixture("reference_calibration.csv");
  auto opacus_rdp = rdp_with_orders(library_orders("opacus"));
  auto dpa_rdp = rdp_with_orders(library_orders("dp-accounting"));
  auto default_rdp = make("rdp"), prv = make("prv");
  constexpr double prv_tolerance = 1e-4, rdp_tolerance = 1e-9, eps_error = 0.01;  // privdiff prv's default
  std::map<std::string, double> cache;
  auto calibrate = [&](const Accountant& acc, const std::string& key, const CsvRow& row, double tol) {
    const std::string id = key + "|" + row.at("events") + "|" + row.at("target_epsilon") + "|" + row.at("delta");
    if (auto it = cache.find(id); it != cache.end()) return it->second;
    const double target = num(row, "target_epsilon"), delta = num(row, "delta");
    auto eps = [&](double s) { return acc.epsilon(event_of(row, s), delta).epsilon; };
    const double sigma =
        calibrate_noise_multiplier(acc, [&](double s) { return event_of(row, s); }, target, delta, tol)
            .noise_multiplier;
    EXPECT_LE(eps(sigma), target) << id;                   // never above the target (Opacus #346)
    EXPECT_GT(eps(sigma * (1 - 2 * tol)), target) << id;  // and the smallest such sigma
    return cache[id] = sigma;
  };
  Largest sigma_rdp{"calibrated sigma: rdp (library orders) vs library rdp"},
      sigma_prv{"calibrated sigma: prv vs library prv/pld"};
  int checked = 0;
  for (const auto& row : rows) {
    const std::string lib = row.at("library"), method = row.at("method");
    const double target = num(row, "target_epsilon"), delta = num(row, "delta"), sigma_ref = num(row, "sigma");
    const double eps_ref = num(row, "epsilon_at_sigma"), tol = num(row, "tolerance");
    const std::string at = row.at("scenario") + " eps=" + row.at("target_epsilon") + " " + lib + "/" + method;
    auto event_at = [&](double s) { return event_of(row, s); };
    // The libraries' own contracts: Opacus (#346 fixed: it returns the safe end of its bracket) and
    // dp-accounting never above the target; prv-accountant asserts only upper < target + eps_error.
    if (lib == "prv-accountant") {
      EXPECT_LT(eps_ref, target + tol) << at;
    } else {
      EXPECT_LE(eps_ref, target) << at;
    }
    const Accountant& acc = method == "prv" || method == "pld" ? *prv
                            : lib == "opacus"                  ? *opacus_rdp
                                                               : *dpa_rdp;
    const double our_tolerance = &acc == prv.get() ? prv_tolerance : rdp_tolerance;
    const double ours = calibrate(acc, method == "rdp" ? "rdp/" + lib + " orders" : "prv", row, our_tolerance);
    const auto at_ref = acc.epsilon(event_at(sigma_ref), delta);
    // dp-accounting's sigma is within 1e-6 of its own root: in epsilon, 1e-6 times the slope.
    auto slope = [&] {
      const double h = 1e-4 * sigma_ref;
      return std::fabs(acc.epsilon(event_at(sigma_ref - h), delta).epsilon -
                       acc.epsilon(event_at(sigma_ref + h), delta).epsilon) / (2 * h);
    };
    double measured = at_ref.epsilon, below = 0, above = 0;  // the band: [target - below, target + above]
    if (lib == "opacus" && method == "rdp") {
      below = tol + 1e-9 * target, above = 1e-9 * target;  // same epsilon as Opacus (see RdpMatchesOpacus...)
    } else if (method == "rdp") {
      // privdiff <= dp-accounting <= target; equal curves where privdiff's optimal order is an
      // integer; elsewhere below by dp-accounting's fractional-order overestimate (RdpMatchesDpAccounting-
      // AtIntegerOrders...): <= 0.19% on the DPDM / DP-LDM / DP-FETA grid, 0.58% at PrivImage's
      // q = 0.39 over 129 steps, so 1%.
      const double order = detail_of(at_ref, "optimal_order");
      above = 1e-9 * target;
      below = order == std::floor(order) ? 2e-6 * slope() + 1e-9 * target : 1e-2 * target;
    } else if (method == "pld") {
      measured = detail_of(at_ref, "epsilon_estimate");  // the pessimistic PLD is the true epsilon to ~1e-3
      below = eps_error + 2e-6 * slope(), above = eps_error;
    } else {
      below = tol + eps_error, above = (lib == "prv-accountant" ? tol : 0) + eps_error;  // upper bounds both
    }
    EXPECT_GE(measured, target - below) << at;
    EXPECT_LE(measured, target + above) << at;
    if (at_ref.epsilon <= target) {
      EXPECT_LE(ours, sigma_ref * (1 + our_tolerance)) << at;
    } else {
      EXPECT_GE(ours, sigma_ref) << at;
    }
    (method == "rdp" ? sigma_rdp : sigma_prv).add(ours, sigma_ref, at);
    if (method == "rdp") {  // privdiff's default orders (a superset of both lists) need no more noise
      EXPECT_LE(calibrate(*default_rdp, "rdp/default orders", row, rdp_tolerance), ours * (1 + 2 * rdp_tolerance)) << at;
    }
    ++checked;
  }
  EXPECT_GE(checked, 40);
}
