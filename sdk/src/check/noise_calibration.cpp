#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_stage.hpp>


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

// One replay's release, the stage run by the record-replay harness on the deterministic stand-in:
// its one step's update (SGD, lr 1: the noised gradient), flattened, and the ledger it wrote.
at::Tensor one_release(const MechanismUnderTest& make, MechanismSettings settings, const ReplayData& data,
                       std::string& ledger_text) {
  ModelSpec spec;
  spec.loss_noise = 0.0;
  const MechanismFactory factory = [&](std::uint64_t seed) {
    settings.seed = seed;
    return make(settings);
  };
  const StageRun run = run_stage(factory, *settings.seed, spec, data);
  std::vector<at::Tensor> update;
  for (const auto& t : run.releases.at(0)) update.push_back(t.flatten());
  ledger_text = run.ledger;
  return at::cat(update).to(at::kDouble);
}

}  // namespace

std::pair<double, double> chi_ratio_band(std::int64_t k, double false_alarm) {
  if (k < 1 || !(false_alarm > 0 && false_alarm < 1)) throw std::invalid_argument("chi_ratio_band: bad arguments");
  const double z = normal_quantile_above(false_alarm / 2), v = 2.0 / (9.0 * static_cast<double>(k));
  auto quantile = [&](double sign) { return std::pow(std::max(0.0, 1 - v + sign * z * std::sqrt(v)), 1.5); };
  return {quantile(-1), quantile(+1)};  // sqrt of (chi2_k / k)'s Wilson-Hilferty quantiles
}

NoiseCheck check_noise_calibration(const MechanismUnderTest& make, const NoiseCheckOptions& o) {
  if (o.replays < 2 || o.records < 1) throw std::invalid_argument("noise check: need >= 2 replays and >= 1 record");
  const ReplayData data(random_images(o.records, 5));
  MechanismSettings settings;
  settings.batch_size = o.records;  // q = 1
  settings.steps = 1;
  settings.noise_multiplier = o.noise_multiplier;
  settings.physical_batch_size = o.physical_batch_size;
  NoiseCheck out;
  const std::string expected =
      PrivacyEvent::poisson_sampled(1.0, PrivacyEvent::gaussian(o.noise_multiplier)).to_string();
  std::vector<at::Tensor> releases;
  for (std::int64_t r = 0; r < o.replays; ++r) {
    settings.seed = o.seed + static_cast<std::uint64_t>(r);
    std::string ledger;
    releases.push_back(one_release(make, settings, data, ledger));
    if (r == 0) out.ledger = ledger;
    if (ledger != expected && out.violations.empty()) {
      out.violations.push_back("the ledger records " + ledger + " for one step configured as " + expected);
    }
  }
  const at::Tensor all = at::stack(releases);  // [R, d]
  const std::int64_t d = all.size(1);
  out.degrees_of_freedom = d * (o.replays - 1);
  const double pooled = (all - all.mean(0, true)).pow(2).sum().item<double>() / static_cast<double>(out.degrees_of_freedom);
  out.configured_std = o.noise_multiplier * o.max_grad_norm / static_cast<double>(o.records);
  out.measured_std = std::sqrt(pooled);
  std::tie(out.low, out.high) = chi_ratio_band(out.degrees_of_freedom, o.false_alarm);
  char text[320];
  if (!std::isfinite(out.measured_std)) {
    out.violations.push_back("the update is not finite");
  } else if (out.measured_std == 0) {
    out.violations.push_back("the update is the same in every replay: its noise does not come from the seeded noise "
                             "stream (is it seeded from the data, or missing?)");
  } else if (out.ratio() < out.low || out.ratio() > out.high) {
    std::snprintf(text, sizeof text,
                  "the noise's std is %.4g times the sigma C / (q N) = %.6g the ledger states (a correct mechanism "
                  "is within [%.4f, %.4f] but with probability %.0e)",
                  out.ratio(), out.configured_std, out.low, out.high, o.false_alarm);
    out.violations.push_back(text);
  }
  return out;
}

std::string NoiseCheck::describe() const {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "  noise std per coordinate: measured %.6g, stated %.6g (ratio %.4f; band [%.4f, %.4f], %lld degrees of freedom)\n",
                measured_std, configured_std, ratio(), low, high, static_cast<long long>(degrees_of_freedom));
  s << line << "  ledger of one step: " << ledger << "\n";
  for (const auto& v : violations) s << "  VIOLATION: " << v << "\n";
  return s.str();
}

}  // namespace privdiff::sdk::check
