#pragma once
// How many CPU threads LibTorch uses: the recipe's [run] threads or a command's --threads.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <thread>

namespace privdiff::core {

/// `threads` > 0: that many; 0: every core. (LibTorch's own default is 1 on some builds.)
inline void use_cpu_threads(std::int64_t threads) {
  at::set_num_threads(threads > 0 ? static_cast<int>(threads)
                                  : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

/// [run] threads = 0 for one of `processes` processes on this machine: the cores shared out.
inline std::int64_t cores_per_process(int processes) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, processes));
}

}  // namespace privdiff::core
