// privdiff: the host's command line. Subcommands live in core/cli/*_command.cpp.
#include "cli/commands.hpp"
#include "recipe/diagnostic.hpp"
#include "recipe/suggest.hpp"
#include "util/cpu_threads.hpp"
#include "util/usage_error.hpp"

#include <privdiff/build_config.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/host_allocator.hpp>
#include <privdiff/io/json_error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace {

// PRIVDIFF_PARSE_ONLY=1: parse the command line, check its requirements, then stop before any
// command runs (exit 0 when it parses, 2 when not). Thrown from the root's parse-complete callback,
// which CLI11 runs after the requirements are checked and before any subcommand's callback.
// PRIVDIFF_PARSE_ONLY=lines: the same for many command lines in one process, one JSON array of
// arguments per line of stdin, answered by one {"code", "output"} line each: scripts/check_docs.py
// checks the docs' 150 command lines so, instead of paying LibTorch's start-up 150 times.
struct ParsedOnly {};

std::string parse_only_mode() {
  const char* value = std::getenv("PRIVDIFF_PARSE_ONLY");
  return value ? value : "";
}

using namespace privdiff::core;
using namespace privdiff::core::cli;

// Exit code 2 naming an unknown command (CLI11 would only say "A subcommand is required"), or 0.
int refuse_unknown_command(const CLI::App& app, int argc, char** argv) {
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
  return exit_ok;
}

int run_command_line(int argc, char** argv, bool parse_only) {
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
  if (parse_only) app.parse_complete_callback([] { throw ParsedOnly{}; });
  if (const int refused = refuse_unknown_command(app, argc, argv)) return refused;
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
  } catch (const privdiff::sdk::KeyValueError& e) {  // a component's refusal of a value, where no recipe places it
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

// PRIVDIFF_PARSE_ONLY=lines: each line of stdin a JSON array of arguments (without "privdiff").
int parse_command_lines() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> arguments{"privdiff"};
    try {
      for (const auto& argument : nlohmann::json::parse(line)) arguments.push_back(argument.get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      std::cerr << "error: PRIVDIFF_PARSE_ONLY=lines: not a JSON array of strings: " << line << " (" << privdiff::sdk::json_error_text(e) << ")\n";
      return exit_bad_input;
    }
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    std::ostringstream output;
    auto* const out = std::cout.rdbuf(output.rdbuf());
    auto* const err = std::cerr.rdbuf(output.rdbuf());
    const int code = run_command_line(static_cast<int>(argv.size()), argv.data(), true);
    std::cout.rdbuf(out);
    std::cerr.rdbuf(err);
    std::cout << nlohmann::json{{"code", code}, {"output", output.str()}}.dump() << std::endl;
  }
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything large is allocated: steps then reuse freed memory instead of faulting it in again.
  privdiff::sdk::engine::reuse_freed_host_memory();
  if (const std::string bad = privdiff::core::bad_thread_variable(); !bad.empty()) {
    std::cerr << "error: " << bad << "\n";
    return privdiff::core::exit_bad_input;
  }
  const std::string mode = parse_only_mode();
  if (mode == "lines") return parse_command_lines();
  return run_command_line(argc, argv, mode == "1");
}
