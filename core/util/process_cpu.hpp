#pragma once
// CPU time this process has used (user + system, all its threads): the compute a run reports beside
// its wall time, which depends on the machine's load and the thread count while CPU time does not;
// and what CpuShare subtracts from the machine's busy time to see what other processes use.

#include <sys/resource.h>

#include <optional>

namespace privdiff::core {

/// nullopt where getrusage fails.
inline std::optional<double> process_cpu_seconds() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return std::nullopt;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace privdiff::core
