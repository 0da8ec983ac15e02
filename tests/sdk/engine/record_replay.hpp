#pragma once
// Test-only parts of the record-replay harness (the harness itself: <privdiff/check/record_replay.hpp>):
// planted bugs the harness must report, and runs stopped and resumed through the host's own
// checkpoint code (core/run/run_checkpoint.hpp), which the SDK cannot see.
#include "run/run_checkpoint.hpp"

#include <privdiff/check/record_replay.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/privacy/event_json.hpp>

#include <ATen/ATen.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace privdiff::testing::replay {

using namespace privdiff::sdk::check;
namespace engine = privdiff::sdk::engine;

/// Planted bug (a), sensitivity 2C: each example is clipped to 2C while the ledger says C.
class ClipsAtTwiceC : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    engine::ClippedSum sum = engine::clipped_gradient_sum(module, loss, examples, options().noise_multiplicity,
                                                          2 * options().max_grad_norm, options().clipping);
    record_chunk(examples, sum);
    return sum;
  }
};

/// Planted bug (b), data-dependent chunking: a chunk holding an example whose gradient norm is over
/// 100 C is redone in two halves ("for accuracy"). The sum is the same; the number of chunks and
/// forward calls (hence the step's time) now tells whether such an x is in the batch.
class SplitsChunksWithLargeGradients : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    engine::ClippedSum whole = DpSgdMechanism::clipped_chunk_sum(module, loss, examples);
    if (examples < 2 || whole.norms.max().item<double>() < 100 * options().max_grad_norm) {
      record_chunk(examples, whole);
      return whole;
    }
    const std::int64_t half = examples / 2;
    auto part = [&](std::int64_t offset, std::int64_t len) {
      const engine::RowLoss shifted = [&loss, offset](const at::Tensor& e) { return loss(e + offset); };
      return RecordingMechanism::clipped_chunk_sum(module, shifted, len);
    };
    engine::ClippedSum a = part(0, half), b = part(half, examples - half);
    for (std::size_t j = 0; j < a.sums.size(); ++j) a.sums[j] = a.sums[j] + b.sums[j];
    a.norms = at::cat({a.norms, b.norms});
    a.factors = at::cat({a.factors, b.factors});
    return a;
  }
};

/// Planted bug (c), a selection ignored: every parameter trains, though the stage's `train` names a
/// subset. The clipped sum still holds C; only the check of the frozen parameters can see it.
class TrainsEverything : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;
  void select_trainable(sdk::Model& model) const override {
    for (auto& p : model.module().parameters()) p.set_requires_grad(true);
  }
};

/// Planted bug (d), a resume that starts over: the checkpoint's mechanism state is ignored and the
/// stage is redone from its first step, on the restored weights (spending those steps again).
class StartsOverOnResume : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;
  void run(sdk::StageContext& context) override {
    context.resume = nullptr;
    context.resume_step = 0;
    RecordingMechanism::run(context);
  }
};


// A checkpoint file of its own for each resumed run (ranks run in threads of one process).
inline std::filesystem::path checkpoint_file() {
  static std::atomic<int> count{0};
  return std::filesystem::temp_directory_path() /
         ("privdiff-replay-" + std::to_string(::getpid()) + "-" + std::to_string(count++) + ".pt");
}

// Runs `first` for spec.resume_after steps and writes its checkpoint with the host's save_checkpoint;
// a fresh model and mechanism, loaded by the host's load_checkpoint (weights, global generator,
// mechanism state; the ledger from its JSON, as the host restores it), finish the stage. Returns them.
inline std::unique_ptr<detail::StageAttempt> checkpointed_stop_and_resume(detail::StageAttempt& first, const MechanismFactory& make,
                                                     std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
                                                     sdk::PrivacyLedger& ledger, StageRun& run,
                                                     sdk::Collective* collective) {
  struct Stopped {};
  const std::filesystem::path file = checkpoint_file();
  try {
    first.run_steps(spec, run, [&](const sdk::StepReport& report, const sdk::StateWriter& state) {
      if (report.step != spec.resume_after) return;
      core::CheckpointPosition position;
      position.step = report.step;
      position.ledger_json = sdk::to_json(ledger);
      core::save_checkpoint(file, position, *first.model, state);
      throw Stopped{};
    });
    throw std::logic_error("resume_after " + std::to_string(spec.resume_after) + ": the stage ended before that step");
  } catch (const Stopped&) {
  }
  auto second = std::make_unique<detail::StageAttempt>(make, seed, spec, data, ledger, run, collective);
  const core::LoadedCheckpoint loaded = core::load_checkpoint(file, *second->model);
  std::filesystem::remove(file);
  ledger = sdk::privacy_ledger_from_json(loaded.position.ledger_json);
  second->context.resume = loaded.mechanism_state.get();
  second->context.resume_step = loaded.position.step;
  second->run_steps(spec, run);
  second->context.resume = nullptr;
  return second;
}


inline Report compare_runs(const std::string& what, const StageRun& uninterrupted, const StageRun& resumed) {
  Report report;
  const std::size_t steps = std::min(uninterrupted.releases.size(), resumed.releases.size());
  if (uninterrupted.releases.size() != resumed.releases.size()) {
    report.add(what + ": " + std::to_string(uninterrupted.releases.size()) + " steps uninterrupted, " +
               std::to_string(resumed.releases.size()) + " resumed");
  }
  auto same = [&](const std::string& part, const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    Report scratch;
    const Measurement m = distance_between(what + ", " + part, a, b, 1.0, 0.0, 0.0, 0.0, scratch);
    report.measurements.insert(report.measurements.end(), scratch.measurements.begin(), scratch.measurements.end());
    if (scratch.violations.empty()) return;
    report.add(std::isnan(m.distance) ? scratch.violations.front()
                                      : what + ", " + part + ": " + std::to_string(m.distance) +
                                            " away from the uninterrupted run's");
  };
  for (std::size_t j = 0; j < steps; ++j) {
    same("step " + std::to_string(j + 1) + "'s update", uninterrupted.releases[j], resumed.releases[j]);
  }
  same("final weights", uninterrupted.final_weights, resumed.final_weights);
  if (uninterrupted.ledger != resumed.ledger) {
    report.add(what + ": the ledger is " + resumed.ledger + " resumed, " + uninterrupted.ledger + " uninterrupted");
  }
  report.add(first_difference(what + ": the released trace differs", uninterrupted.trace.released, resumed.trace.released));
  detail::check_frozen(what, {resumed}, report);
  return report;
}

/// The stage run uninterrupted (mechanisms from `make`) and stopped after `stop_after` steps and
/// resumed (mechanisms from `make_resumed`: the same factory, or a planted bug), compared by
/// compare_runs.
inline Report audit_resume(const std::string& what, const MechanismFactory& make, const MechanismFactory& make_resumed,
                           std::uint64_t seed, ModelSpec spec, const sdk::Dataset& data, std::int64_t stop_after) {
  spec.resume_after = 0;
  const StageRun uninterrupted = run_stage(make, seed, spec, data);
  spec.resume_after = stop_after;
  spec.stop_and_resume = checkpointed_stop_and_resume;
  return compare_runs(what, uninterrupted, run_stage(make_resumed, seed, spec, data));
}


}  // namespace privdiff::testing::replay
