#pragma once
// privdiff running privdiff: the ranks of `run --nproc` and the candidate runs of `sweep`. The parent
// waits while its children stop themselves (a checkpoint, exit 3) on Ctrl-C from the terminal; a
// SIGTERM sent to the parent alone is for it to pass on; and a child whose parent dies (kill -9) gets
// SIGTERM, never running on unseen while a --resume writes the same run directory.

#include <csignal>
#include <functional>
#include <string>
#include <vector>

namespace privdiff::core {

/// While it lives, SIGINT and SIGTERM to this process are remembered instead of acted on (one at a
/// time in a process); the handlers before it are back when it goes.
class StopSignalsHeld {
 public:
  StopSignalsHeld();
  ~StopSignalsHeld();
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

  /// The signal received since the last call (SIGINT or SIGTERM), or 0.
  int take();
  /// In a forked child: the handlers before this object, as the child's own program expects them.
  void restore() const;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

/// Forks and runs privdiff itself (/proc/self/exe) with `argv` (argv[0] included). In the child: the
/// handlers `held` replaced are restored, SIGTERM is asked for should this process die, `setup` runs
/// (e.g. setenv), then the exec; a failed exec says so on stderr naming `what`, and exits 127.
/// Throws std::runtime_error when the fork fails.
pid_t start_child_privdiff(const std::vector<std::string>& argv, const StopSignalsHeld& held, const std::string& what,
                           const std::function<void()>& setup = {});

}  // namespace privdiff::core
