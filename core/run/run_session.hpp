#pragma once
// What the phases of one run share (RunSession: its directory, ledger, metrics stream, timers,
// datasets, checkpoint) and the small helpers they have in common. Private to core/run: the phases
// are RunOrchestrator's member functions, one file each (preflight*.cpp, privacy_plan.cpp,
// run_directory.cpp, stage_runner.cpp, run_reports.cpp).

#include "data/dataset_identity.hpp"
#include "data/protected_data.hpp"
#include "data/record_set.hpp"
#include "util/atomic_file.hpp"
#include "util/cpu_share.hpp"
#include "util/process_cpu.hpp"
#include "run/init_from.hpp"
#include "run/metrics_log.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_ledger.hpp"
#include "run/run_orchestrator.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

namespace fs = std::filesystem;

// One invocation of run() (or check()): what the phases share.
struct RunSession {
  RunSession(fs::path dir, std::ostream& out, const RunOptions& opts) : run_dir(std::move(dir)), log(out), options(opts) {}

  fs::path run_dir;
  std::ostream& log;
  const RunOptions& options;
  RunSummary summary;
  // The recipe's datasets by name, opened once; the dataset private stages train on ("" if none).
  std::map<std::string, std::unique_ptr<sdk::Dataset>> datasets;
  std::map<std::string, DatasetIdentity> identities;  // by dataset name (data read from files, not releases)
  // Data released by a stage (DP-FETA's central images), by name -> the releasing stage. Opened
  // (into `datasets`) when that stage has run, or from the run directory on resume.
  std::map<std::string, std::size_t> released;
  bool is_released(const std::string& name) const { return released.count(name) > 0; }
  std::string private_data;
  std::string data_fingerprint;  // of every dataset the stages use (keyed), for the resume check
  std::string data_digest;       // the same, plain: for the ranks' check, never written
  std::int64_t total_params = 0;
  c10::Device device{c10::kCPU};  // [run] device, resolved
  std::vector<std::int64_t> stage_trainable;  // trainable parameters of each stage
  // Training time of each stage over every session (a stopped stage's time up to its checkpoint:
  // the steps after it are redone). Absent for a stage resumed from a checkpoint that did not
  // record it (privdiff 0.11 and before).
  std::map<std::size_t, double> stage_seconds;
  struct StageClock {
    std::size_t stage = 0;
    double earlier = 0;  // the stage's time in earlier sessions (NaN: not known)
    std::chrono::steady_clock::time_point since;
    double seconds() const {
      return earlier + std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    }
  };
  std::optional<StageClock> stage_clock;  // the stage training now
  /// Each stage's time so far, in stage order (NaN where none is known): what a checkpoint keeps.
  std::vector<double> stage_seconds_now(std::size_t stages) const {
    std::vector<double> out(stages, std::nan(""));
    for (const auto& [i, seconds] : stage_seconds) {
      if (i < stages) out[i] = seconds;
    }
    if (stage_clock && stage_clock->stage < stages) out[stage_clock->stage] = stage_clock->seconds();
    return out;
  }
  std::optional<InitSource> init;  // [run] init_from
  bool carry = false;              // its ledger is carried into this run's
  std::string carry_reason;
  std::vector<std::string> init_caveats;  // what [run] init_from_disjoint waived
  std::vector<std::string> data_caveats;  // what pre-flight's data checks let through on the user's word
  // Per [[eval]]: the prompts its samples are drawn from (checked against the private captions in
  // pre-flight), and the caveat of those allowed though private (allow_private_prompts); empty: none.
  std::vector<std::vector<std::string>> eval_prompts;
  std::vector<std::string> eval_prompt_caveats;
  // The private data of the run and its init_from ancestry, for the data-identity checks of every
  // other data the run uses (RunOrchestrator::protected_data): opened once, when first needed.
  std::optional<OpenedProtectedData> protected_data;
  std::vector<RecordSet> record_sets;     // what the run trained on by content, with the ancestry's
  std::string recipe_sha;
  std::optional<LoadedCheckpoint> resumed;
  bool restart = false;  // --resume of a run killed before its first checkpoint: a fresh start in place
  MetricsLog metrics;  // metrics.jsonl and its TensorBoard events (rank 0 only)
  double earlier_seconds = 0;  // training time of earlier sessions of this run
  double earlier_cpu_seconds = 0;  // and their CPU time (this process's: rank 0's in a multi-process run)
  std::chrono::steady_clock::time_point session_start = std::chrono::steady_clock::now();
  double session_cpu_start = process_cpu_seconds().value_or(0);
  std::int64_t session_steps = 0;
  std::optional<CpuShare> cpu_share;  // [run] threads = 0 in one process: the cores others leave idle
  double training_seconds = 0;
  double training_cpu_seconds = 0;
  std::int64_t grid_images = 0;  // samples.png: images sampled and how long it took (the sampling
  double grid_seconds = 0;       // rate that `privdiff sample --count N`'s time is projected from)

  /// Re-chooses the thread count from the machine's load (cpu_share), saying so when it changes.
  void adapt_threads(std::chrono::duration<double> period);
  const sdk::Dataset& stage_data(const Recipe& recipe, std::size_t i) const { return *datasets.at(recipe.stages[i].data); }
  std::int64_t stage_size(std::size_t i) const { return stage_sizes.at(i); }
  std::vector<std::int64_t> stage_sizes;  // N of each stage's dataset
  fs::path checkpoint_path() const { return run_dir / "checkpoint.pt"; }
  fs::path metrics_path() const { return run_dir / "metrics.jsonl"; }
  double wall_now() const {
    return earlier_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - session_start).count();
  }
  double cpu_now() const { return earlier_cpu_seconds + process_cpu_seconds().value_or(0) - session_cpu_start; }
  /// Rank 0 of a multi-process run (or the only process): the one that writes the run directory.
  bool writes() const { return !options.collective || options.collective->rank() == 0; }
  /// Whether to stop here; in a multi-process run rank 0 decides for all (every rank calls this at
  /// the same points), so they stop at the same step.
  bool stop_wanted() const {
    const bool wanted = (options.stop_after_steps > 0 && session_steps >= options.stop_after_steps) ||
                        (options.stop_requested && options.stop_requested());
    return options.collective ? sdk::agree_with_rank0(*options.collective, wanted) : wanted;
  }
  void write_ledger() const {
    if (writes()) write_file_atomically(run_dir / "ledger.json", sdk::to_json(summary.ledger));
  }
};

/// In a released-NAME directory: written once the release is complete (a resume reuses it).
inline constexpr const char* release_marker = "release.json";

bool any_private(const ComposedRun& run);
/// epsilon (or any number) with 4 significant digits.
std::string format_epsilon(double eps);
/// "1 h 2 min", "3 min 4 s", "5.6 s".
std::string format_duration(double seconds);
/// Equal noise multipliers (NaN = none), as a checkpoint compares them.
bool same_sigma(double a, double b);
/// A run killed after writing its recipe.toml but before its first checkpoint.
bool killed_before_first_checkpoint(const fs::path& run_dir);
/// The ledger.json of a run being resumed; a damaged one refuses the resume (RunRefused: bad input,
/// exit 2), naming the file.
RunLedger resumed_ledger(const fs::path& run_dir);
/// Refuses a run directory that cannot be used, before anything is computed or written.
void check_run_dir(const fs::path& run_dir, bool resume, bool restart);
/// Examples per logical step as planned (q N of the stage's first Gaussian kind).
double expected_examples_per_step(const sdk::Mechanism& mechanism, std::int64_t dataset_size);
/// PRIVDIFF_TEST_KILL_AT=NAME kills the process here (the crash-safety tests).
void test_kill_point(const char* name);
extern const char* const private_diagnostics_caveat;
/// The ranks of a multi-process run start together or not at all: a refusal on any rank (`refused`
/// not empty) refuses the run on every rank, said once.
void agree_to_start(sdk::Collective& ranks, const std::string& refused);

}  // namespace privdiff::core
