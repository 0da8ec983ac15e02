#pragma once
// GroupNorm's group count for LDM-style blocks: the largest divisor of `channels` up to 32 (LDM's
// Normalize uses 32 groups; small test and CPU models have fewer channels).

#include <algorithm>
#include <cstdint>

namespace privdiff::sdk::diffusion {

inline std::int64_t norm_groups(std::int64_t channels) {
  for (std::int64_t g = std::min<std::int64_t>(32, channels); g > 1; --g) {
    if (channels % g == 0) return g;
  }
  return 1;
}

}  // namespace privdiff::sdk::diffusion
