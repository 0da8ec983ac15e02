// The small helpers the phases of a run share (run_session.hpp).
#include "run/run_session.hpp"

#include <privdiff/components/mechanism.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

bool any_private(const ComposedRun& run) {
  for (const auto& m : run.mechanisms) {
    if (m->is_private()) return true;
  }
  return false;
}

std::string format_epsilon(double eps) {
  std::ostringstream os;
  os.precision(4);
  os << eps;
  return os.str();
}



bool same_sigma(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b));
}

std::string format_duration(double seconds) {
  std::ostringstream os;
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s >= 3600) os << s / 3600 << " h " << (s % 3600) / 60 << " min";
  else if (s >= 60) os << s / 60 << " min " << s % 60 << " s";
  else os << std::setprecision(3) << seconds << " s";
  return os.str();
}

// A run killed after writing its recipe.toml but before its first checkpoint: --resume starts it
// over in place, keeping what its ledger.json says was spent.
RunLedger resumed_ledger(const fs::path& run_dir) {
  try {
    return read_run_ledger(run_dir);
  } catch (const std::runtime_error& e) {
    throw RunRefused("cannot resume " + run_dir.string() + ": " + e.what());
  }
}

bool killed_before_first_checkpoint(const fs::path& run_dir) {
  std::error_code ec;
  return fs::is_regular_file(run_dir / "recipe.toml", ec) && !fs::exists(run_dir / "checkpoint.pt", ec);
}

// Refuses a run directory that cannot be used, before anything is computed or written.
void RunSession::adapt_threads(std::chrono::duration<double> period) {
  if (!cpu_share) return;
  if (const auto change = cpu_share->rechoose(period)) {
    at::set_num_threads(change->first);
    log << "threads: " << change->second << "\n";
  }
}

void check_run_dir(const fs::path& run_dir, bool resume, bool restart) {
  std::error_code ec;
  if (restart) return;
  if (resume) {
    if (!fs::is_regular_file(run_dir / "checkpoint.pt", ec)) {
      throw std::runtime_error("cannot resume " + run_dir.string() + ": it has no checkpoint.pt (was it started by "
                               "privdiff run, and did it reach its first checkpoint?)");
    }
    return;
  }
  if (fs::exists(run_dir, ec) && !fs::is_directory(run_dir, ec)) {
    throw std::runtime_error("run directory " + run_dir.string() + " is a file, not a directory; choose another --out");
  }
  if (fs::is_directory(run_dir, ec) && holds_only_temporary_files(run_dir)) {
    remove_stale_temporary_files(run_dir);  // a run killed while writing its first file wrote nothing
  }
  if (fs::exists(run_dir, ec) && !fs::is_empty(run_dir, ec)) {
    throw std::runtime_error("run directory " + run_dir.string() +
                             " already exists and is not empty; choose another --out, or continue it with "
                             "privdiff run --resume " + run_dir.string() + " (nothing was changed)");
  }
}

// Examples per logical step as planned (q N, of the stage's first Gaussian kind): what a
// private stage's progress shows instead of the realised batch sizes.
double expected_examples_per_step(const sdk::Mechanism& mechanism, std::int64_t dataset_size) {
  if (!mechanism.is_private()) return 0;
  const auto kinds = sdk::gaussian_steps(mechanism.planned_events(dataset_size));
  return kinds.empty() ? 0 : kinds.front().sampling_rate * static_cast<double>(dataset_size);
}

// A test hook: PRIVDIFF_TEST_KILL_AT=NAME makes the process die here as if killed -9, so that a test
// can stop a run between two writes (the crash-safety tests).
void test_kill_point(const char* name) {
  const char* at = std::getenv("PRIVDIFF_TEST_KILL_AT");
  if (at && std::strcmp(at, name) == 0) std::raise(SIGKILL);
}

const char* const private_diagnostics_caveat =
    "metrics.jsonl and its TensorBoard copy events.out.tfevents.privdiff record each private step's loss and "
    "realised batch size, computed without noise ([run] private_diagnostics = true): publishing them is outside "
    "the guarantee";
// The ranks of a multi-process run start training together or not at all: a refusal on any rank
// (rank 0's run directory check, a device) refuses the run on every rank, said once — by rank 0
// when it refused, else by the ranks that did — instead of leaving the others waiting.
void agree_to_start(sdk::Collective& ranks, const std::string& refused) {
  std::vector<at::Tensor> count{at::full({1}, refused.empty() ? 0 : 1, at::kLong)};
  ranks.all_reduce_sum(count);
  if (count[0].item<std::int64_t>() == 0) return;
  const bool rank0_refused = sdk::agree_with_rank0(ranks, !refused.empty());
  if (refused.empty()) {
    throw RunRefused(ranks.rank() == 0 ? "another rank refused the run (its message is above)" : "");
  }
  throw RunRefused(ranks.rank() == 0 || !rank0_refused ? refused : "");
}


}  // namespace privdiff::core
