#include <privdiff/privacy/calibration.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace privdiff::sdk {

namespace {

// Above it (e^1000 as the bound on the likelihood ratio) a guarantee promises nothing, and the
// accountants' work grows with epsilon (PRV's grid): such a noise target is refused rather than
// searched for (a step count's search stays cheap: it needs no smaller noise).
constexpr double largest_target = 1000;

void check_target(double target_epsilon, double delta) {
  if (!(target_epsilon > 0) || !std::isfinite(target_epsilon)) {
    throw std::invalid_argument("calibration: target epsilon must be finite and > 0");
  }
  if (!(delta > 0 && delta < 1)) throw std::invalid_argument("calibration: delta must be in (0, 1)");
}

void check_meaningful(double target_epsilon) {
  if (target_epsilon > largest_target) {
    char text[160];
    std::snprintf(text, sizeof text, "calibration: target epsilon %.6g is above %g, where a guarantee promises nothing "
                  "(set the noise multiplier instead, or a target of at most %g)", target_epsilon, largest_target,
                  largest_target);
    throw std::invalid_argument(text);
  }
}

double epsilon_of(const Accountant& accountant, const PrivacyEvent& event, double delta) {
  if (auto why = accountant.cannot_evaluate(event); !why.empty()) throw std::invalid_argument(why);
  return accountant.epsilon(event, delta).epsilon;
}

// "1e-09", "2.5": a figure as %g (std::to_string's %f prints a small epsilon as 0.000000).
std::string figure(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

}  // namespace

NoiseCalibration calibrate_noise_multiplier(const Accountant& accountant,
                                            const std::function<PrivacyEvent(double)>& events,
                                            double target_epsilon, double delta, double tolerance,
                                            double max_noise_multiplier) {
  check_target(target_epsilon, delta);
  check_meaningful(target_epsilon);
  if (!(tolerance > 0)) throw std::invalid_argument("calibration: tolerance must be > 0");
  auto eps = [&](double sigma) { return epsilon_of(accountant, events(sigma), delta); };
  // An accountant that cannot evaluate so little noise (PRV's grid at a tiny sigma over many steps)
  // is above the target: more noise is tried. The sigma returned always has its epsilon computed.
  std::string failed;
  auto eps_or_above = [&](double sigma) {
    try {
      return eps(sigma);
    } catch (const std::runtime_error& e) {
      failed = e.what();
      return std::numeric_limits<double>::infinity();
    }
  };

  // Bracket: hi meets the target, lo does not.
  double hi = 1.0;
  double eps_hi = eps_or_above(hi);
  while (!(eps_hi <= target_epsilon)) {
    if (hi >= max_noise_multiplier) {
      throw std::runtime_error("calibration: no noise multiplier up to " + figure(max_noise_multiplier) +
                               " meets the target epsilon " + figure(target_epsilon) + " at delta " + figure(delta) +
                               (std::isfinite(eps_hi) ? " (it gives epsilon " + figure(eps_hi) + ")"
                                                      : " (the accountant: " + failed + ")") +
                               ": the plan spends too much for any noise (fewer steps or iterations, a smaller "
                               "sampling rate, or a larger target)");
    }
    hi = std::min(hi * 2, max_noise_multiplier);
    eps_hi = eps_or_above(hi);
  }
  double lo = hi / 2;
  while (eps_or_above(lo) <= target_epsilon) {
    hi = lo;
    lo /= 2;
    if (lo < 1e-6) return {hi, eps(hi)};  // practically no noise needed
  }
  // Bisection in log space; the invariant eps(hi) <= target keeps the answer on the safe side.
  while (hi / lo - 1 > tolerance) {
    const double mid = std::sqrt(lo * hi);
    if (eps_or_above(mid) <= target_epsilon) hi = mid;
    else lo = mid;
  }
  return {hi, eps(hi)};
}

std::int64_t calibrate_steps(const Accountant& accountant, const std::function<PrivacyEvent(std::int64_t)>& events,
                             double target_epsilon, double delta, std::int64_t max_steps) {
  check_target(target_epsilon, delta);
  auto fits = [&](std::int64_t t) { return epsilon_of(accountant, events(t), delta) <= target_epsilon; };
  if (!fits(0)) return 0;
  // Gallop up from lo (fits) until a probe fails or the cap is reached, then bisect.
  std::int64_t lo = 0, hi = 0, stride = 1;
  while (true) {
    const std::int64_t probe = lo > max_steps - stride ? max_steps : lo + stride;
    if (probe == lo) return lo;  // lo == max_steps
    if (!fits(probe)) {
      hi = probe;
      break;
    }
    lo = probe;
    stride = stride > max_steps / 2 ? max_steps : stride * 2;
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace privdiff::sdk
