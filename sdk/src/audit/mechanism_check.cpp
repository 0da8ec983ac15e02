#include <privdiff/audit/mechanism_check.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <sstream>

namespace privdiff::sdk::audit {

MechanismCheck check_mechanism(const check::MechanismUnderTest& make, MechanismCheckOptions o) {
  o.replay.max_grad_norm = o.max_grad_norm;
  o.noise.max_grad_norm = o.max_grad_norm;
  o.model_replay.max_grad_norm = o.max_grad_norm;
  o.model_noise.max_grad_norm = o.max_grad_norm;
  MechanismCheck out;
  // A mechanism that throws where the engine refuses what it did (a second event for one batch, a
  // declared release not made) fails that check with the reason.
  bool stopped = false;
  try {
    out.replay = check::check_by_record_replay(make, o.replay);
    if (o.model_replay.model.make) out.replay.merge(check::check_by_record_replay(make, o.model_replay));
  } catch (const std::exception& e) {
    out.replay.add(std::string("a run of the mechanism stopped with an error: ") + e.what());
    stopped = true;
  }
  auto noise_check = [&](const check::NoiseCheckOptions& options, check::NoiseCheck& result) {
    try {
      result = check::check_noise_calibration(make, options);
    } catch (const std::exception& e) {
      result.violations.push_back(std::string("a run of the mechanism stopped with an error: ") + e.what());
      stopped = true;
    }
  };
  noise_check(o.noise, out.noise);
  if (o.model_noise.model.make) noise_check(o.model_noise, out.model_noise.emplace());
  out.model_label = o.model_noise.label;
  if (o.accountant && !stopped) {  // its runs would stop alike
    check::MechanismSettings settings;  // "auto" sigma, secure noise, the whole batch in one chunk
    settings.steps = 4;
    try {
      out.canaries = audit_with_gradient_canaries(make, settings, o.max_grad_norm, *o.accountant, o.target_epsilon,
                                                  o.delta, o.canaries, o.auditor);
    } catch (const std::exception& e) {
      out.canaries_error = std::string("a run of the mechanism stopped with an error: ") + e.what();
    }
  }
  return out;
}

std::string MechanismCheck::describe() const {
  std::ostringstream s;
  s << "(a) record replay: " << (replay.violations.empty() ? "passed" : "FAILED") << ", largest distance "
    << replay.worst_ratio() << " C (the bound) over " << replay.measurements.size() << " releases\n";
  constexpr std::size_t shown = 6;  // the rest are usually the same bug seen from other records
  for (std::size_t i = 0; i < replay.violations.size() && i < shown; ++i) s << "  VIOLATION: " << replay.violations[i] << "\n";
  if (replay.violations.size() > shown) s << "  ... and " << replay.violations.size() - shown << " more violations\n";
  s << "(b) noise: " << (noise.passed() ? "passed" : "FAILED") << "\n" << noise.describe();
  if (model_noise) {
    s << "(b) noise" << model_label << ": " << (model_noise->passed() ? "passed" : "FAILED") << "\n" << model_noise->describe();
  }
  if (canaries) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "(c) gradient canaries: %s, epsilon lower bound %.4g (%.0f%% confidence) vs reported %.4g; "
                  "sigma %.4g, %lld steps, N %lld\n",
                  canaries->passed() ? "passed" : "FAILED", canaries->bound.epsilon_lower,
                  canaries->bound.confidence * 100, canaries->reported_epsilon, canaries->noise_multiplier,
                  static_cast<long long>(canaries->steps), static_cast<long long>(canaries->dataset_size));
    s << line;
    if (!noise.releases.empty()) {
      s << "  (c) sees the gradient updates only: the declared releases are checked by (a) and (b)\n";
    }
  } else if (!canaries_error.empty()) {
    s << "(c) gradient canaries: FAILED\n  VIOLATION: " << canaries_error << "\n";
  } else {
    s << "(c) gradient canaries: not run (no accountant)\n";
  }
  s << (passed() ? "mechanism check passed\n" : "MECHANISM CHECK FAILED\n");
  return s.str();
}

}  // namespace privdiff::sdk::audit
