#pragma once
// The CLI's subcommands. Each add_*_command registers its options on `app` and returns the
// subcommand; main.cpp stays a dispatcher.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace privdiff::core::cli {

/// Options every subcommand shares.
struct GlobalOptions {
  std::vector<std::string> plugin_paths;  ///< --plugin-path, searched before everything else
  std::string command_line;               ///< how privdiff was invoked (for run provenance)
  std::vector<std::string> arguments;     ///< argv as given (what `run --nproc` starts its ranks with)
};

/// Exit codes: 0 success, 1 the work failed, 2 bad input (arguments, recipe, unknown id),
/// 3 a run stopped on request (--stop-after-steps, Ctrl-C) after writing its checkpoint.
enum ExitCode : int { exit_ok = 0, exit_failure = 1, exit_bad_input = 2, exit_stopped = 3 };

/// Thrown for bad input the user can fix; main prints what() and exits with exit_bad_input.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Checks for integer options with plain messages ("must be an integer >= 1, got 0"); CLI11's
/// PositiveNumber describes its range with 308-digit bounds.
CLI::Validator at_least(long long minimum);

CLI::App* add_plugins_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_validate_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_params_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_run_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_sample_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_eval_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_compare_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_account_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_audit_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_weights_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_sweep_command(CLI::App& app, const GlobalOptions& global, int& exit_code);

}  // namespace privdiff::core::cli
