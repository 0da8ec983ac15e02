#pragma once
// CPU time this process has used (user + system, all its threads): the compute a run reports beside
// its wall time, which depends on the machine's load and the thread count while CPU time does not.

#include <sys/resource.h>

namespace privdiff::core {

inline double process_cpu_seconds() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace privdiff::core
