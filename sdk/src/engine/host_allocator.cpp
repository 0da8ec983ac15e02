#include <privdiff/engine/host_allocator.hpp>

#include <cstdlib>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace privdiff::sdk::engine {

std::string reuse_freed_host_memory() {
#if defined(__GLIBC__)
  const char* system = std::getenv("PRIVDIFF_SYSTEM_MALLOC");
  if (system && std::string(system) == "1") return "system defaults (PRIVDIFF_SYSTEM_MALLOC=1)";
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::string(tunables).find("glibc.malloc.") != std::string::npos) {
    return "system defaults with GLIBC_TUNABLES";
  }
  // Setting either threshold also turns off glibc's dynamic thresholds, which settle at twice the
  // largest freed block for trimming: still below one step's freed activations.
  constexpr int mmap_threshold = 32 << 20;  // glibc's maximum (HEAP_MAX_SIZE / 2 on 64-bit)
  constexpr int trim_threshold = 1 << 30;
  if (mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1) {
    return "freed memory kept for reuse (mmap threshold 32 MiB, trim threshold 1 GiB)";
  }
  return "system defaults (mallopt refused)";
#else
  return "system defaults (not glibc)";
#endif
}

}  // namespace privdiff::sdk::engine
