#pragma once
// The CLI's subcommands. Each add_*_command registers its options on `app` and returns the
// subcommand; main.cpp stays a dispatcher.

#include "util/usage_error.hpp"

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
CLI::App* add_check_mechanism_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_weights_command(CLI::App& app, const GlobalOptions& global, int& exit_code);
CLI::App* add_sweep_command(CLI::App& app, const GlobalOptions& global, int& exit_code);

}  // namespace privdiff::core::cli
