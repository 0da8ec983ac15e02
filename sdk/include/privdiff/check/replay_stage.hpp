#pragma once
/// @file
/// Running a mechanism's stage for a record-replay check: the release of every logical step read
/// from the weights, what was decided (released and internal traces), the ledger against the plan,
/// and the seeds that arrange Poisson batches so that D and D + x differ by x alone.

#include <privdiff/check/recording_mechanism.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_report.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

namespace engine = privdiff::sdk::engine;

// ---------------------------------------------------------------------------------------------
// Running a DP-SGD stage on one dataset

/// What one rank saw of a stage: the release of each logical step (the update the optimizer
/// applied, divided by lr: with SGD, lr 1, no momentum and no EMA, exactly the noised gradient
/// (clipped sum + noise) / (q N)), the trace, the ledger against the plan, the final weights, the
/// parameters it must not train that moved (each a finding) and, for a RecordingMechanism, its steps.
struct StageRun {
  std::vector<std::vector<at::Tensor>> releases;
  /// Per logical step: the weights after it, its declared releases (StageContext::released_statistic:
  /// DP-SGD's release_statistic), the sensitivity it reported (its clip norm) and its own metrics.
  std::vector<std::vector<at::Tensor>> weights_after;
  std::vector<std::vector<sdk::ReleasedStatistic>> statistics;
  std::vector<double> sensitivities;
  std::vector<std::map<std::string, double>> metrics;
  std::vector<std::vector<sdk::StepReport::NoiseBasis>> noise_bases;  ///< StepReport::noise_bases, per step
  Trace trace;
  std::string ledger, planned;
  std::vector<RecordingMechanism::Step> recorded;
  std::vector<at::Tensor> final_weights;
  std::vector<std::string> frozen_moved;
  /// Per parameter in module order: whether the stage trains it (requires_grad after its select_trainable).
  std::vector<bool> trains;
};


namespace detail {

// A parameter the stage must not train, with its value before the run.
struct FrozenParameter {
  std::string name;
  at::Tensor live, before;
};

// Those of ModelSpec::trains' complement (else those the mechanism left frozen), as they are now.
inline std::vector<FrozenParameter> frozen_parameters(sdk::Model& model, const ModelSpec& spec) {
  const std::vector<sdk::ParameterInfo> infos = engine::parameters_with_roles(model);
  const std::vector<bool> selected = spec.trains ? engine::selected_parameters(infos, *spec.trains) : std::vector<bool>{};
  std::vector<FrozenParameter> out;
  for (std::size_t j = 0; j < infos.size(); ++j) {
    const bool trains = spec.trains ? selected[j] : infos[j].parameter.requires_grad();
    if (!trains) out.push_back({infos[j].name, infos[j].parameter, infos[j].parameter.detach().clone()});
  }
  return out;
}

// Parameters the stage must not train that moved, in any run (one finding per run).
inline void check_frozen(const std::string& what, const std::vector<StageRun>& runs, Report& report) {
  for (const StageRun& r : runs) {
    if (r.frozen_moved.empty()) continue;
    report.add(what + ": " + std::to_string(r.frozen_moved.size()) + " parameters moved, though the stage does not " +
               "train them (first: " + r.frozen_moved.front() + ")");
  }
}

inline std::string step_line(const sdk::StepReport& report) {
  std::string line = "step " + std::to_string(report.step) + "/" + std::to_string(report.total_steps) + " engine {";
  for (const auto& [key, value] : report.engine) {
    if (key != "seconds_per_example") line += key + ": " + value + "; ";  // timings: measured, not decided
  }
  return line + "}";
}

using AfterStep = std::function<void(const sdk::StepReport&, const sdk::StateWriter&)>;

// One model and mechanism running a stage into `run`: the whole stage, or its part before or after a resume.
struct StageAttempt {
  std::unique_ptr<sdk::Model> model;
  std::unique_ptr<sdk::Mechanism> mechanism;
  sdk::StageContext context;

  StageAttempt(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
               sdk::PrivacyLedger& ledger, StageRun& run, sdk::Collective* collective)
      : model(build_model(spec, &run.trace.internal)), mechanism(make(seed)), context{*model, data, ledger, 0, {}} {
    context.collective = collective;
    context.public_data = spec.public_data;
    if (auto* r = recording()) r->trace = &run.trace;
  }
  RecordingMechanism* recording() { return dynamic_cast<RecordingMechanism*>(mechanism.get()); }

  // ModelSpec::imposed: the declared releases of its step return the imposed values, in order.
  void impose_releases(const ModelSpec& spec, StageRun& run) {
    if (!spec.imposed) return;
    auto next = std::make_shared<std::size_t>(0);
    context.replay_release = [imposed = spec.imposed, &run, next](const sdk::ReleasedStatistic& s) {
      if (static_cast<std::int64_t>(run.releases.size()) + 1 != imposed->step) return s.value;
      if (*next >= imposed->statistics.size()) {
        throw std::logic_error("replay: the step makes more declared releases than the run it replays (" + s.name + ")");
      }
      return imposed->statistics[(*next)++].clone();
    };
  }
  // ModelSpec::imposed's weights, copied into the model; returns them.
  std::vector<at::Tensor> impose_weights(const ImposedState& imposed) {
    torch::NoGradGuard no_grad;
    std::size_t j = 0;
    for (auto& p : model->module().parameters()) {
      if (j >= imposed.weights.size()) throw std::logic_error("replay: imposed weights do not fit the model");
      p.copy_(imposed.weights[j++]);
    }
    return weights_of(*model);
  }

  // Runs the mechanism, recording each step's release (the update it applied) and report; then
  // (also when `after_step`, which sees each step, stops the run by throwing) what it recorded and
  // which parameters it must not train moved.
  void run_steps(const ModelSpec& spec, StageRun& run, const AfterStep& after_step = {}) {
    mechanism->select_trainable(*model);
    run.trains.clear();
    for (const auto& p : model->module().parameters()) run.trains.push_back(p.requires_grad());
    const std::vector<FrozenParameter> frozen = frozen_parameters(*model, spec);
    std::vector<at::Tensor> before = weights_of(*model);
    std::vector<sdk::ReleasedStatistic> pending;  // this step's declared releases
    context.released_statistic = [&pending](const sdk::ReleasedStatistic& s) { pending.push_back(s); };
    impose_releases(spec, run);
    context.step_done = [&](const sdk::StepReport& report, const sdk::StateWriter& state) {
      run.trace.released.push_back(step_line(report));
      std::vector<at::Tensor> now = weights_of(*model);
      std::vector<at::Tensor> update;
      for (std::size_t j = 0; j < now.size(); ++j) update.push_back(before[j] - now[j]);
      run.releases.push_back(update);
      if (spec.imposed && report.step == spec.imposed->step) now = impose_weights(*spec.imposed);
      run.weights_after.push_back(now);
      run.statistics.push_back(std::move(pending));
      pending.clear();
      run.sensitivities.push_back(report.sensitivity);
      run.metrics.push_back(report.metrics);
      run.noise_bases.push_back(report.noise_bases);
      before = now;
      if (after_step) after_step(report, state);
    };
    auto keep = [&] {
      for (const auto& f : frozen) {
        if (!at::equal(f.live, f.before)) run.frozen_moved.push_back(f.name);
      }
      if (auto* r = recording()) run.recorded.insert(run.recorded.end(), r->steps.begin(), r->steps.end());
    };
    try {
      mechanism->run(context);
    } catch (...) {
      keep();
      throw;
    }
    keep();
  }
};

// What the stage left: the final weights and which train, the ledger against the plan.
inline void finish_stage(StageAttempt& last, const sdk::PrivacyLedger& ledger, const sdk::Dataset& data, StageRun& run) {
  std::size_t trainable = 0, all = 0;
  for (const auto& p : last.model->module().parameters()) {
    trainable += p.requires_grad() ? 1 : 0;
    ++all;
    run.trace.released.push_back("final weight " + shape_of(p));
  }
  run.trace.released.push_back("trainable: " + std::to_string(trainable) + " of " + std::to_string(all) + " tensors");
  run.trace.released.push_back("ledger: " + std::to_string(ledger.steps()) + " steps in " +
                               std::to_string(ledger.entries().size()) + " entries, " +
                               std::to_string(ledger.caveats().size()) + " caveats");
  for (const auto& c : ledger.caveats()) run.trace.released.push_back("caveat: " + c);
  run.ledger = ledger.total().to_string();
  run.planned = last.mechanism->planned_events(data.size()).to_string();
  run.final_weights = weights_of(*last.model);
}

}  // namespace detail

/// Runs a stage of the mechanism `make` builds (with `seed`) on a model `spec` builds and `data`, as
/// one rank of `ranks` (null: one process); stopped and resumed after spec.resume_after steps when
/// that is set. Throws what the mechanism throws.
inline StageRun run_stage(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
                          sdk::Collective* ranks = nullptr) {
  StageRun run;
  sdk::PrivacyLedger ledger;
  std::unique_ptr<RecordingCollective> collective;
  if (ranks) collective = std::make_unique<RecordingCollective>(*ranks, run.trace.internal);
  auto attempt = std::make_unique<detail::StageAttempt>(make, seed, spec, data, ledger, run, collective.get());
  if (spec.resume_after > 0) {
    if (!spec.stop_and_resume) throw std::logic_error("ModelSpec::resume_after is set but stop_and_resume is not");
    attempt = spec.stop_and_resume(*attempt, make, seed, spec, data, ledger, run, collective.get());
  } else {
    attempt->run_steps(spec, run);
  }
  detail::finish_stage(*attempt, ledger, data, run);
  return run;
}

/// A run stopped and resumed (ModelSpec::resume_after) against the same run uninterrupted: every
/// step's release and the final weights equal, and the same ledger and released trace.
/// Runs a stage on every rank of a run (one rank: this process) and returns each rank's StageRun.
using Runner = std::function<std::vector<StageRun>(const MechanismFactory&, std::uint64_t seed, const ModelSpec&,
                                              const sdk::Dataset&)>;

inline std::vector<StageRun> one_process(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec,
                                    const sdk::Dataset& data) {
  return {run_stage(make, seed, spec, data, nullptr)};
}

/// The DP-SGD sampling rate for n records (the engine's: min(1, B / n)).
inline double sampling_rate(std::int64_t batch, std::int64_t n) {
  return std::min(1.0, static_cast<double>(batch) / static_cast<double>(n));
}

/// What a replay needs of the Poisson batches (replay_seed).
struct BatchPlan {
  std::int64_t step = 1;       ///< k: the logical step whose batch is arranged (1: the first)
  bool x_in_batch = true;      ///< x in the k-th batch of D ∪ {x} (it is in none before)
  bool d_batch_empty = false;  ///< D's k-th batch empty (x alone in the batch of D ∪ {x})
  std::int64_t chunk = 0;      ///< > 0: D's k-th batch a non-empty multiple of it
  std::int64_t later = 0;      ///< the steps after k whose batches are D's on both (x in none of them)
};

/// A test-only seed whose Poisson batches on N + 1 records (rate `q_with`) are the batches on N
/// records (rate `q_without`) at every step before k (x in none: fixed membership), and at step k
/// that batch plus x (index N), or without it for x_in_batch = false. The two rates differ when
/// q = B / N (the engine's DP-SGD); for central images they are one q_c.
inline std::uint64_t replay_seed(std::int64_t n, double q_without, double q_with, const BatchPlan& plan) {
  auto same = [](const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::equal(a, b); };
  for (std::uint64_t seed = 1; seed < 1000000; ++seed) {
    engine::PoissonSampler without(n, q_without,
                                   engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
    engine::PoissonSampler with(n + 1, q_with,
                                engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
    bool fits = true;
    for (std::int64_t step = 1; step < plan.step && fits; ++step) fits = same(with.next(), without.next());
    if (!fits) continue;
    at::Tensor expected = without.next();
    const std::int64_t b = expected.numel();
    if (plan.d_batch_empty && b > 0) continue;
    if (plan.chunk > 0 && (b == 0 || b % plan.chunk != 0)) continue;
    if (plan.x_in_batch) expected = at::cat({expected, at::full({1}, n, at::kLong)});
    if (!same(with.next(), expected)) continue;
    for (std::int64_t step = 0; step < plan.later && fits; ++step) fits = same(with.next(), without.next());
    if (fits) return seed;
  }
  throw std::runtime_error("replay_seed: no seed found");
}

/// replay_seed for the first step: x in its batch (or not), D's batch empty or not.
inline std::uint64_t replay_seed(std::int64_t n, double q_without, double q_with, bool x_in_batch,
                                 bool d_batch_empty = false) {
  return replay_seed(n, q_without, q_with, BatchPlan{1, x_in_batch, d_batch_empty, 0});
}


}  // namespace privdiff::sdk::check
