#include "util/cpu_share.hpp"

#include "util/process_cpu.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace privdiff::core {

CpuShare::CpuShare(int cores) : cores_(std::max(1, cores)), threads_(std::max(1, cores)), last_(sample()) {}

std::optional<CpuShare::Sample> CpuShare::sample() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool known = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  std::ifstream stat("/proc/stat");
  if (!stat) return std::nullopt;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  Sample s;
  s.at = std::chrono::steady_clock::now();
  bool any = false;
  for (std::string line; std::getline(stat, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;  // "cpuN ..."
    std::istringstream in(line.substr(3));
    int cpu = 0;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    if (!in || (known && !CPU_ISSET(cpu, &allowed))) continue;
    s.machine_busy += (user + nice + system + irq + softirq + steal) / tick;
    any = true;
  }
  const std::optional<double> own = process_cpu_seconds();
  if (!any || !own) return std::nullopt;
  s.own = *own;
  return s;
}

std::optional<std::pair<int, std::string>> CpuShare::rechoose(std::chrono::duration<double> period) {
  if (!last_) return std::nullopt;
  if (std::chrono::steady_clock::now() - last_->at < period) return std::nullopt;
  const std::optional<Sample> now = sample();
  if (!now) return std::nullopt;
  const double wall = std::chrono::duration<double>(now->at - last_->at).count();
  const double others = std::max(0.0, (now->machine_busy - last_->machine_busy) - (now->own - last_->own)) / wall;
  last_ = now;
  const int chosen = std::clamp(static_cast<int>(std::lround(static_cast<double>(cores_) - others)), 1, cores_);
  if (chosen == threads_) return std::nullopt;
  threads_ = chosen;
  char used[16];
  std::snprintf(used, sizeof used, "%.1f", others);
  return std::pair<int, std::string>{
      chosen, std::string("other processes use ") + used + " of this machine's " + std::to_string(cores_) +
                  " cores: privdiff now uses " + std::to_string(chosen) + " thread" + (chosen == 1 ? "" : "s") +
                  " (threads competing for a core wait for each other at every step; [run] threads = N fixes the "
                  "number)"};
}

}  // namespace privdiff::core
