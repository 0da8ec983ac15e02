#pragma once
// How many CPU threads LibTorch uses: the recipe's [run] threads or a command's --threads.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace privdiff::core {

/// The cores this process may use: $OMP_NUM_THREADS when it is set to a positive number (the usual
/// way to share a machine among processes, e.g. tests run in parallel: two processes each using
/// every core oversubscribe it, and LibTorch's spinning workers then slow both many times over),
/// otherwise every core.
inline int available_cores() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0) return std::atoi(omp);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

/// A thread-count variable LibTorch reads (OMP_NUM_THREADS, MKL_NUM_THREADS) set to something other
/// than a positive integer, as "NAME=VALUE: expected ..." (empty: none). LibTorch would print a C++
/// stack trace for it and carry on.
inline std::string bad_thread_variable() {
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (!value || *value == '\0') continue;  // empty: as unset
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (end == value || (*end != '\0' && *end != ',') || n < 1) {  // OpenMP's "8,1" (nested levels) is fine
      return std::string(name) + "=" + value + ": expected a positive integer, the threads per process (unset it "
             "to use every core)";
    }
  }
  return {};
}

/// `threads` > 0: that many; 0: every available core. (LibTorch's own default is 1 on some builds.)
inline void use_cpu_threads(std::int64_t threads) {
  at::set_num_threads(threads > 0 ? static_cast<int>(threads) : available_cores());
}

/// [run] threads = 0 for one of `processes` processes on this machine: the cores shared out.
inline std::int64_t cores_per_process(int processes) {
  return std::max(1, available_cores() / std::max(1, processes));
}

}  // namespace privdiff::core
