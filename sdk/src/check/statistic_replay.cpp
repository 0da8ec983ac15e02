#include <privdiff/check/statistic_replay.hpp>

#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace privdiff::sdk::check {

namespace {

// Everything about a run that must not depend on x: the ledger (and the plan), each statistic's name,
// shape, sensitivity and noise, and the released data's shape.
std::vector<std::string> structure_of(const StatisticStageRun& run) {
  std::vector<std::string> log{"ledger: " + run.ledger, "plan: " + run.plan};
  for (const ReleasedStatistic& s : run.statistics) {
    std::ostringstream line;
    line << "statistic '" << s.name << "' " << shape_of(s.value) << ", sensitivity " << s.sensitivity << ", noise std "
         << s.noise_std << (s.adaptive ? ", adaptive" : "");
    log.push_back(line.str());
  }
  log.push_back("released images: " + (run.released_images.defined() ? shape_of(run.released_images) : "none"));
  return log;
}

// What the run declares must agree with itself: the ledger is the plan, and each statistic's noise is
// the mechanism's noise multiplier times the sensitivity it states.
void check_declarations(const StatisticStageRun& run, Report& report) {
  if (run.statistics.empty()) {
    report.add("the stage reported no released statistic (StageContext::released_statistic): there is nothing to "
               "replay, and a private stage that releases something must report it");
  }
  if (run.ledger != run.plan) report.add("the ledger (" + run.ledger + ") is not the plan (" + run.plan + ")");
  for (const ReleasedStatistic& s : run.statistics) {
    if (!(s.sensitivity > 0) || !(s.noise_std > 0)) {
      report.add("statistic '" + s.name + "': its sensitivity and noise std must be positive");
      continue;
    }
    const double sigma = s.noise_std / s.sensitivity;
    if (run.noise_multiplier && std::abs(sigma - *run.noise_multiplier) > 1e-9 * *run.noise_multiplier) {
      char text[200];
      std::snprintf(text, sizeof text, "': noise std / sensitivity is %.9g, but the mechanism's noise multiplier is %.9g",
                    sigma, *run.noise_multiplier);
      report.add("statistic '" + s.name + text);
    }
  }
}

// Rounding room for a difference of two released values whose noise is the same draw.
double rounding_slack(const at::Tensor& value) {
  const double eps = value.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                                         : std::numeric_limits<float>::epsilon();
  return 4 * eps * value.to(at::kDouble).norm().item<double>();
}

// Checks 1 and 2 for one neighbour.
void compare_runs(const std::string& what, const StatisticStageRun& on_d, const StatisticStageRun& on_x,
                  const StatisticReplayOptions& options, Report& report) {
  report.add(first_difference(what + ": structure", structure_of(on_d), structure_of(on_x)));
  if (on_d.released_labels.defined() && on_x.released_labels.defined() &&
      !at::equal(on_d.released_labels, on_x.released_labels)) {
    report.add(what + ": the released labels differ");
  }
  if (on_d.statistics.size() != on_x.statistics.size()) return;
  for (std::size_t i = 0; i < on_d.statistics.size(); ++i) {
    const ReleasedStatistic &a = on_d.statistics[i], &b = on_x.statistics[i];
    if (a.adaptive || a.value.sizes() != b.value.sizes()) continue;
    distance_between(what + ", " + a.name, {a.value}, {b.value}, 1.0, a.sensitivity, options.relative_slack,
                     rounding_slack(a.value), report);
  }
}

// Check 3: on D, two noise seeds; each non-adaptive statistic's difference is pure noise, N(0, 2 s^2).
void check_noise(const StatisticStageRun& a, const StatisticStageRun& b, const StatisticReplayOptions& options,
                 Report& report) {
  if (a.statistics.size() != b.statistics.size()) {
    report.add("noise check: the two noise seeds released " + std::to_string(a.statistics.size()) + " and " +
               std::to_string(b.statistics.size()) + " statistics");
    return;
  }
  for (std::size_t i = 0; i < a.statistics.size(); ++i) {
    const ReleasedStatistic &s = a.statistics[i], &t = b.statistics[i];
    if (s.adaptive || s.value.sizes() != t.value.sizes() || !(s.noise_std > 0)) continue;
    const std::int64_t m = s.value.numel();
    const double ratio = ((s.value.to(at::kDouble) - t.value.to(at::kDouble)).pow(2).sum().item<double>() /
                          (2.0 * static_cast<double>(m) * s.noise_std * s.noise_std));
    const double measured = std::sqrt(ratio);
    const auto [low, high] = chi_ratio_band(m, options.false_alarm);
    report.measurements.push_back({"noise of " + s.name + ": measured std / declared (band " + std::to_string(low) +
                                       " to " + std::to_string(high) + ")",
                                   measured, high});
    if (measured < low || measured > high) {
      char text[200];
      std::snprintf(text, sizeof text, ": its noise std is %.4g times the declared %.6g, outside [%.4g, %.4g]", measured,
                    s.noise_std, low, high);
      report.add("noise of " + s.name + text);
    }
  }
}

}  // namespace

Report check_statistic_releases(const StatisticStage& stage, const ReplayData& d, const std::vector<Neighbour>& neighbours,
                                const StatisticReplayOptions& options) {
  Report report;
  const StatisticStageRun on_d = stage(d, options.noise_seed);
  check_declarations(on_d, report);
  for (const Neighbour& x : neighbours) {
    compare_runs("x = " + x.name, on_d, stage(d.with(x.image, x.label, x.caption), options.noise_seed), options, report);
  }
  check_noise(on_d, stage(d, options.noise_seed + 1), options, report);
  return report;
}

StatisticStage statistic_stage(StatisticMechanism make, Model& model, const Dataset* public_data, std::int64_t classes,
                               std::uint64_t seed) {
  return [make = std::move(make), &model, public_data, classes, seed](const Dataset& data, std::uint64_t noise_seed) {
    std::unique_ptr<Mechanism> mechanism = make(noise_seed);
    // Sensitivity does not depend on sigma; an "auto" one gets a fixed value, as the host's calibration would.
    if (mechanism->needs_calibration()) mechanism->set_noise_multiplier(1.0);
    mechanism->select_trainable(model);
    PrivacyLedger ledger;
    StageContext context{model, data, ledger, seed, {}};
    context.num_classes = classes;
    context.public_data = public_data;
    StatisticStageRun run;
    context.release = [&run](const at::Tensor& images, const at::Tensor& labels) {
      run.released_images = images.detach().to(at::kCPU).clone();
      run.released_labels = labels.detach().to(at::kCPU).clone();
    };
    context.released_statistic = [&run](const ReleasedStatistic& s) {
      ReleasedStatistic copy = s;
      copy.value = s.value.detach().to(at::kCPU).clone();
      run.statistics.push_back(std::move(copy));
    };
    mechanism->run(context);
    run.ledger = ledger.total().to_string();
    run.plan = mechanism->planned_events(data.size()).to_string();
    run.noise_multiplier = mechanism->noise_multiplier();
    return run;
  };
}

}  // namespace privdiff::sdk::check
