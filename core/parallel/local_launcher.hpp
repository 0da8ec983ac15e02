#pragma once
// `privdiff run --nproc N`: the run as N processes on this machine, each a rank of one
// data-parallel run (torchrun's variables, rendezvous on 127.0.0.1 at a free port).

#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

/// Starts `argv` (argv[0]: the executable, run as /proc/self/exe) `nproc` times as ranks 0..nproc-1
/// and waits for them. When a rank fails (non-zero exit or a signal) the others are stopped
/// (SIGTERM, then SIGKILL after `grace_seconds`) and a line on `err` names the rank. Returns 0
/// when every rank succeeded; the failing rank's exit code (1 for a signal) otherwise; 3 when every
/// rank stopped on request. SIGINT/SIGTERM to the launcher are passed on to the ranks.
int run_local_processes(int nproc, const std::vector<std::string>& argv, std::ostream& err, int grace_seconds = 10);

/// A TCP port on 127.0.0.1 that is free now (the kernel's choice).
int free_loopback_port();

}  // namespace privdiff::core
