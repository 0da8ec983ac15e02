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

}  // namespace privdiff::core
