#pragma once
// How many threads a run should use when it was told nothing ([run] threads = 0, no
// $OMP_NUM_THREADS): the cores that other processes leave idle, re-measured as the run goes.
//
// Why: LibTorch's OpenMP workers wait for each other at the end of every parallel region. When
// another process takes one of the cores, the worker on that core runs a fraction of the time and
// every region waits for it: on a 2-core machine with one other busy process, 2 threads trained the
// quickstart's warm-up at 20-70 examples/s against 180-390 with 1 (bench/threads_under_load.sh).
// OMP_WAIT_POLICY=PASSIVE softens it but does not remove it, and it must be set before the process
// starts. So the run measures what others use — the machine's busy time (/proc/stat, over the CPUs
// this process may run on) minus its own (getrusage) — and uses the cores left.

#include <chrono>
#include <optional>
#include <string>

namespace privdiff::core {

class CpuShare {
 public:
  /// `cores`: the most threads to use (the cores this process may run on).
  explicit CpuShare(int cores);
  /// Measures again (at most every `period`): the thread count for the cores others left idle
  /// since the last measurement, and why, when it differs from the current one; set it with
  /// at::set_num_threads. nullopt when unchanged, too soon, or where /proc/stat cannot be read.
  std::optional<std::pair<int, std::string>> rechoose(std::chrono::duration<double> period = std::chrono::seconds(5));
  int threads() const { return threads_; }

 private:
  struct Sample {
    double machine_busy = 0;  // CPU-seconds of the CPUs we may use, all processes
    double own = 0;           // CPU-seconds of this process
    std::chrono::steady_clock::time_point at;
  };
  static std::optional<Sample> sample();
  int cores_, threads_;
  std::optional<Sample> last_;
};

}  // namespace privdiff::core
