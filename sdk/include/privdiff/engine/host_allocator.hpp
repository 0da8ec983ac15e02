#pragma once
/// @file
/// The C library's allocator, set up for training steps. A step frees and re-allocates the same
/// tens of megabytes of activations and gradients; glibc's defaults hand that memory back to the
/// system after each step (blocks above its mmap threshold, and heap tops above its trim
/// threshold), so the next step takes a page fault for every 4 KiB page again — measured on a
/// 2-core machine, 40,000-50,000 faults and 10-35 % of a step of DPDM's UNet (docs/engine.md).
/// Keeping freed memory for reuse removes that cost; peak memory grows by a few per cent.

#include <privdiff/sdk_api.hpp>

#include <string>

namespace privdiff::sdk::engine {

/// Makes glibc's malloc keep freed memory for reuse: blocks up to 32 MiB (glibc's largest mmap
/// threshold) come from the heap, and the heap is handed back only when over 1 GiB of its top is
/// free. Call once at process start, before large allocations. Leaves the allocator alone where
/// the user set `GLIBC_TUNABLES` malloc options, with `PRIVDIFF_SYSTEM_MALLOC=1`, or where the C
/// library is not glibc. Returns what it did, in words (for logs and benchmarks).
PRIVDIFF_SDK_API std::string reuse_freed_host_memory();

}  // namespace privdiff::sdk::engine
