#pragma once
// What the stage runner does after every logical step, as one small type: the step's line in
// metrics.jsonl (with epsilon so far on ~200 evenly spaced steps), a progress line every 2 s at most,
// ledger.json written before either reaches the disk, a checkpoint when one is due, and a stop when one
// is requested (after that checkpoint).

#include "run/run_session.hpp"

#include <privdiff/components/mechanism.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace privdiff::core {

class StepRecord {
 public:
  struct Settings {
    std::string stage;                  ///< the stage's name
    bool log_batch = true;              ///< loss and realised batch size may be shown (public, or diagnostics)
    double expected_batch = 0;          ///< q N: what a private stage's speed counts instead
    std::int64_t checkpoint_every = 0;  ///< [run] checkpoint_every (0: only at stage ends)
    std::int64_t resume_step = 0;       ///< steps done before this session (for the ETA)
    /// Epsilon spent so far; empty for a non-private stage or a recipe without delta.
    std::function<double()> epsilon_so_far;
    /// Writes a mid-stage checkpoint after `step` steps with the mechanism's state.
    std::function<void(std::int64_t step, const sdk::StateWriter& state)> checkpoint;
  };

  StepRecord(RunSession& session, Settings settings);
  /// StageContext::step_done. Throws RunStopped, after checkpointing, when a stop is wanted.
  void operator()(const sdk::StepReport& report, const sdk::StateWriter& save_state);

 private:
  void write_metrics_line(const sdk::StepReport& r, double epsilon);
  void print_progress(const sdk::StepReport& r, double elapsed);
  void print_engine(const std::map<std::string, std::string>& engine);

  RunSession& s_;
  Settings settings_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_print_ = start_ - std::chrono::seconds(10);
  double examples_ = 0;
  double latest_epsilon_;
};

}  // namespace privdiff::core
