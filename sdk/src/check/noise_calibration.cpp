#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_stage.hpp>
#include <privdiff/privacy/ledger.hpp>


#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace privdiff::sdk::check {

namespace {

// z with P(Z > z) = tail for a standard normal Z (bisection on erfc: tails down to 1e-300).
double normal_quantile_above(double tail) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// One replay: the stage run by the record-replay harness on the deterministic stand-in for two steps,
// each step's update divided by the learning rate (plain SGD: the noised gradient), per tensor, and the
// ledger it wrote.
std::vector<std::vector<at::Tensor>> two_steps(const MechanismUnderTest& make, MechanismSettings settings,
                                               const ReplayData& data, std::string& ledger_text) {
  ModelSpec spec;
  spec.loss_noise = 0.0;
  const MechanismFactory factory = [&](std::uint64_t seed) {
    settings.seed = seed;
    return make(settings);
  };
  const StageRun run = run_stage(factory, *settings.seed, spec, data);
  if (run.releases.size() != 2) {
    throw std::runtime_error("noise check: the mechanism took " + std::to_string(run.releases.size()) +
                             " steps where it was configured for 2");
  }
  std::vector<std::vector<at::Tensor>> steps;
  for (const auto& release : run.releases) {
    std::vector<at::Tensor> tensors;
    for (const auto& t : release) tensors.push_back(t.flatten().to(at::kDouble) / settings.lr);
    steps.push_back(std::move(tensors));
  }
  ledger_text = run.ledger;
  return steps;
}

// The stand-in's parameter names, in the order of its parameters (and so of a release's tensors).
std::vector<std::string> parameter_names() {
  ModelSpec spec;
  spec.loss_noise = 0.0;
  std::vector<std::string> names;
  for (const auto& item : build_model(spec, nullptr)->module().named_parameters()) names.push_back(item.key());
  return names;
}

// The std of the rows of `values` ([R, d]) around their mean, with d (R - 1) degrees of freedom.
double pooled_std(const at::Tensor& values) {
  const double dof = static_cast<double>(values.size(1) * (values.size(0) - 1));
  return std::sqrt((values - values.mean(0, true)).pow(2).sum().item<double>() / dof);
}

// One noise measurement against its band: a violation (empty: none).
std::string outside_band(const std::string& what, double measured, double stated, std::int64_t dof, double false_alarm) {
  if (!std::isfinite(measured)) return what + " is not finite";
  if (measured <= 1e-9 * stated) {  // the same in every replay, up to rounding
    return what + " is the same in every replay: it receives no noise from the seeded noise stream (is its noise "
                  "missing, or seeded from the data?)";
  }
  const auto [low, high] = chi_ratio_band(dof, false_alarm);
  const double ratio = measured / stated;
  if (ratio >= low && ratio <= high) return {};
  char text[400];
  std::snprintf(text, sizeof text,
                "%s: the noise's std is %.4g times the sigma C / (q N) = %.6g the ledger states (a correct mechanism "
                "is within [%.4f, %.4f] but with probability %.0e)",
                what.c_str(), ratio, stated, low, high, false_alarm);
  return text;
}

}  // namespace

std::pair<double, double> chi_ratio_band(std::int64_t k, double false_alarm) {
  if (k < 1 || !(false_alarm > 0 && false_alarm < 1)) throw std::invalid_argument("chi_ratio_band: bad arguments");
  const double z = normal_quantile_above(false_alarm / 2), v = 2.0 / (9.0 * static_cast<double>(k));
  auto quantile = [&](double sign) { return std::pow(std::max(0.0, 1 - v + sign * z * std::sqrt(v)), 1.5); };
  return {quantile(-1), quantile(+1)};  // sqrt of (chi2_k / k)'s Wilson-Hilferty quantiles
}

namespace {

// [R, d_j] of tensor j of every replay's release; j = the tensor count: all of them, concatenated.
at::Tensor stacked(const std::vector<std::vector<at::Tensor>>& replays, std::size_t j) {
  std::vector<at::Tensor> rows;
  for (const auto& r : replays) rows.push_back(j == replays.front().size() ? at::cat(r) : r[j]);
  return at::stack(rows);
}

// Each tensor on its own (noise missing on a few tensors hides in the pooled figure), each band at
// `false_alarm` (the check's, divided among its bands, so a correct mechanism still fails with at most it).
void check_each_tensor(const std::vector<std::vector<at::Tensor>>& first, const NoiseCheckOptions& o,
                       double false_alarm, NoiseCheck& out) {
  const std::vector<std::string> names = parameter_names();
  out.worst_tensor_ratio = 1;
  for (std::size_t j = 0; j < first.front().size(); ++j) {
    const at::Tensor values = stacked(first, j);
    const std::string name = j < names.size() ? names[j] : "tensor " + std::to_string(j);
    const double measured = pooled_std(values);
    const double ratio = measured / out.configured_std;
    if (std::fabs(std::log(std::max(ratio, 1e-300))) > std::fabs(std::log(out.worst_tensor_ratio))) {
      out.worst_tensor_ratio = ratio, out.worst_tensor = name;
    }
    const std::string v = outside_band("tensor " + name + " (" + std::to_string(values.size(1)) + " values)", measured,
                                       out.configured_std, values.size(1) * (o.replays - 1), false_alarm);
    if (!v.empty()) out.violations.push_back(v);
  }
}

// The next step: its noise at the stated std, and drawn afresh. The difference of the two steps'
// releases holds both steps' noise, sqrt(2) times the stated std; noise reused leaves none in it.
void check_next_step(const at::Tensor& first, const at::Tensor& second, std::int64_t replays, double false_alarm,
                     NoiseCheck& out) {
  out.second_step_std = pooled_std(second);
  out.step_difference_std = pooled_std(second - first) / std::sqrt(2.0);
  const std::int64_t dof = first.size(1) * (replays - 1);
  if (auto v = outside_band("the second step's update", out.second_step_std, out.configured_std, dof, false_alarm);
      !v.empty()) {
    out.violations.push_back(v);
  }
  if (auto v = outside_band("the difference of two consecutive steps' updates, over sqrt(2)", out.step_difference_std,
                            out.configured_std, dof, false_alarm);
      !v.empty()) {
    out.violations.push_back(v + (out.step_difference_std < out.configured_std / 2
                                      ? ": the second step's noise repeats the first's (noise must be drawn afresh "
                                        "at every step)"
                                      : ""));
  }
}

}  // namespace

NoiseCheck check_noise_calibration(const MechanismUnderTest& make, const NoiseCheckOptions& o) {
  if (o.replays < 2 || o.records < 1) throw std::invalid_argument("noise check: need >= 2 replays and >= 1 record");
  const ReplayData data(random_images(o.records, 5));
  MechanismSettings settings;
  settings.batch_size = o.records;  // q = 1
  settings.steps = 2;
  settings.noise_multiplier = o.noise_multiplier;
  settings.physical_batch_size = o.physical_batch_size;
  // A small step: the second step's gradient is then the first's to ~1e-3, and what differs between the
  // two steps' releases is their noise (reused noise shows as a difference without noise).
  settings.lr = 1e-3;
  NoiseCheck out;
  sdk::PrivacyLedger expected_ledger;
  for (int k = 0; k < 2; ++k) expected_ledger.record(PrivacyEvent::poisson_sampled(1.0, PrivacyEvent::gaussian(o.noise_multiplier)));
  const std::string expected = expected_ledger.total().to_string();
  std::vector<std::vector<at::Tensor>> first, second;  // [replay][tensor]
  for (std::int64_t r = 0; r < o.replays; ++r) {
    settings.seed = o.seed + static_cast<std::uint64_t>(r);
    std::string ledger;
    auto steps = two_steps(make, settings, data, ledger);
    first.push_back(std::move(steps[0]));
    second.push_back(std::move(steps[1]));
    if (r == 0) out.ledger = ledger;
    if (ledger != expected && out.violations.empty()) {
      out.violations.push_back("the ledger records " + ledger + " for two steps configured as " + expected);
    }
  }
  const std::size_t tensors = first.front().size();
  const at::Tensor all = stacked(first, tensors);  // every coordinate
  const std::int64_t d = all.size(1);
  out.degrees_of_freedom = d * (o.replays - 1);
  out.configured_std = o.noise_multiplier * o.max_grad_norm / static_cast<double>(o.records);
  out.measured_std = pooled_std(all);
  std::tie(out.low, out.high) = chi_ratio_band(out.degrees_of_freedom, o.false_alarm);
  if (auto v = outside_band("the update", out.measured_std, out.configured_std, out.degrees_of_freedom, o.false_alarm); !v.empty()) {
    out.violations.push_back(v);
  }
  const double each = o.false_alarm / static_cast<double>(tensors + 2);
  check_each_tensor(first, o, each, out);
  check_next_step(all, stacked(second, tensors), o.replays, each, out);
  return out;
}

std::string NoiseCheck::describe() const {
  std::ostringstream s;
  char line[320];
  std::snprintf(line, sizeof line, "  noise std per coordinate: measured %.6g, stated %.6g (ratio %.4f; band [%.4f, %.4f], %lld degrees of freedom)\n",
                measured_std, configured_std, ratio(), low, high, static_cast<long long>(degrees_of_freedom));
  s << line;
  std::snprintf(line, sizeof line, "  worst tensor: %s (ratio %.4f); second step: ratio %.4f; two steps' difference / sqrt 2: ratio %.4f\n",
                worst_tensor.c_str(), worst_tensor_ratio, configured_std > 0 ? second_step_std / configured_std : 0.0,
                configured_std > 0 ? step_difference_std / configured_std : 0.0);
  s << line << "  ledger of two steps: " << ledger << "\n";
  for (const auto& v : violations) s << "  VIOLATION: " << v << "\n";
  return s.str();
}

}  // namespace privdiff::sdk::check
