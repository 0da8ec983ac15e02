// privdiff: the host's command line. Subcommands live in core/cli/*_command.cpp.
#include "cli/commands.hpp"
#include "recipe/diagnostic.hpp"
#include "recipe/suggest.hpp"

#include <privdiff/build_config.hpp>
#include <privdiff/engine/host_allocator.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace {

// PRIVDIFF_PARSE_ONLY=1: parse the command line, check its requirements, then stop before any
// command runs (exit 0 when it parses, 2 when not). scripts/check_docs.py checks every command line
// the docs show this way. Thrown from the root's parse-complete callback, which CLI11 runs after the
// requirements are checked and before any subcommand's callback.
struct ParsedOnly {};

bool parse_only() {
  const char* value = std::getenv("PRIVDIFF_PARSE_ONLY");
  return value && std::string(value) == "1";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace privdiff::core;
  using namespace privdiff::core::cli;
  // Before anything large is allocated: steps then reuse freed memory instead of faulting it in again.
  privdiff::sdk::engine::reuse_freed_host_memory();

  CLI::App app{"privdiff " PRIVDIFF_SDK_VERSION
               " - differentially private image generation with diffusion models"};
  app.set_version_flag("--version", std::string("privdiff ") + PRIVDIFF_SDK_VERSION);
  app.require_subcommand(1);
  app.fallthrough();

  GlobalOptions global;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    global.arguments.push_back(arg);
    const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`;&|<>*?()[]{}") == std::string::npos;
    global.command_line += (i ? " " : "") + (plain ? arg : "'" + arg + "'");
  }
  app.add_option("--plugin-path", global.plugin_paths,
                 "extra plugin directory, searched before $PRIVDIFF_PLUGIN_PATH (repeatable)")
      ->allow_extra_args(false);
  int exit_code = exit_ok;
  add_plugins_command(app, global, exit_code);
  add_validate_command(app, global, exit_code);
  add_params_command(app, global, exit_code);
  add_run_command(app, global, exit_code);
  add_sample_command(app, global, exit_code);
  add_eval_command(app, global, exit_code);
  add_compare_command(app, global, exit_code);
  add_account_command(app, global, exit_code);
  add_audit_command(app, global, exit_code);
  add_check_mechanism_command(app, global, exit_code);
  add_weights_command(app, global, exit_code);
  add_sweep_command(app, global, exit_code);
  if (parse_only()) app.parse_complete_callback([] { throw ParsedOnly{}; });

  // An unknown command is named (CLI11 would only say "A subcommand is required").
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--plugin-path") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
    if (std::find(commands.begin(), commands.end(), arg) == commands.end()) {
      std::cerr << "error: unknown command '" << arg << "'" << did_you_mean(arg, commands) << "; commands: "
                << join(commands) << " (privdiff --help)\n";
      return exit_bad_input;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const ParsedOnly&) {
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version or the usage error
    return code == 0 ? exit_ok : exit_bad_input;
  } catch (const RecipeError& e) {
    std::cerr << e.what() << "\n"
              << e.diagnostics().size() << (e.diagnostics().size() == 1 ? " error" : " errors") << "\n";
    return exit_bad_input;
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return exit_failure;
  } catch (...) {
    std::cerr << "error: unexpected failure\n";
    return exit_failure;
  }
  return exit_code;
}
