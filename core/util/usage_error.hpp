#pragma once
// Bad input the user can fix (an argument, a recipe value, a directory that is not what was asked for),
// and the exit codes privdiff's commands end with. Anything in core/ may throw UsageError; the CLI's
// main prints its what() and exits with exit_bad_input.

#include <stdexcept>

namespace privdiff::core {

/// Exit codes: 0 success, 1 the work failed, 2 bad input (arguments, recipe, unknown id, a refusal),
/// 3 a run stopped on request (--stop-after-steps, Ctrl-C) after writing its checkpoint.
enum ExitCode : int { exit_ok = 0, exit_failure = 1, exit_bad_input = 2, exit_stopped = 3 };

/// Thrown for bad input the user can fix; main prints what() and exits with exit_bad_input.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace privdiff::core
