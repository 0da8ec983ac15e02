// privdiff sweep RECIPE --param KEY=SPEC... --score METRIC [--candidates DIST ...] [--out DIR]
// privdiff sweep --resume DIR
// Hyperparameter search whose privacy is accounted (Papernot & Steinke 2022): K candidates, K drawn
// at random, each a full run of the recipe with drawn hyperparameters and its noise calibrated so that
// the selection of the best meets the recipe's [privacy] target; only the best is released.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "cli/sweep_planning.hpp"
#include "cli/sweep_release.hpp"
#include "parallel/child_privdiff.hpp"
#include "sweep/sweep_space.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

// Runs privdiff itself with `arguments` and waits; its exit code (1 for a signal). The candidate run
// stops as a run does (a checkpoint, exit 3) on Ctrl-C, which reaches it from the terminal, on a SIGTERM
// sent to the sweep, which is passed on, and when the sweep dies (kill -9): never an orphan run left
// writing a directory that --resume would then write too (parallel/child_privdiff.hpp).
int run_privdiff(const GlobalOptions& global, const std::vector<std::string>& arguments) {
  std::vector<std::string> argv{"privdiff"};
  for (const auto& path : global.plugin_paths) argv.insert(argv.end(), {"--plugin-path", path});
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  std::cout.flush();
  StopSignalsHeld held;
  const pid_t pid = start_child_privdiff(argv, held, "a candidate run");
  // Polled rather than a blocking wait, so that a signal arriving at any moment is seen; a stop asked
  // for is remembered, so the sweep stops after this candidate even when the run had no step left to
  // stop at (it then finished, and is scored on --resume).
  int status = 0;
  bool stop = false, passed_on = false;
  for (;;) {
    if (const int signal = held.take()) {
      stop = true;
      if (signal == SIGTERM && !passed_on) ::kill(pid, SIGTERM);  // Ctrl-C reached it from the terminal
      passed_on = passed_on || signal == SIGTERM;
    }
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const bool stopped_by_signal = WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return stopped_by_signal || (stop && code == exit_ok) ? static_cast<int>(exit_stopped) : code;
}

// Runs (or resumes) candidate i; false when it stopped on request.
bool run_candidate(SweepState& s, std::size_t i, const fs::path& dir, const GlobalOptions& global) {
  const fs::path run_dir = dir / "candidates" / std::to_string(i);
  std::vector<std::string> arguments;
  if (fs::is_regular_file(run_dir / "summary.json")) {
    arguments.clear();  // finished before the sweep was stopped: only its score is missing
  } else if (fs::is_regular_file(run_dir / "recipe.toml")) {
    arguments = {"run", "--resume", run_dir.string()};
  } else {
    try {
      check_recipe_unchanged(s);  // before it spends: a candidate runs from the recipe the sweep planned with
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("sweep: ") + e.what());
    }
    arguments = {"run", s.recipe.string(), "--out", run_dir.string()};
    for (const auto& o : s.overrides) arguments.insert(arguments.end(), {"--set", o});
    for (const auto& [key, value] : s.candidates[i].values) arguments.insert(arguments.end(), {"--set", key + "=" + value});
    std::ostringstream sigma;
    sigma.precision(17);
    sigma << s.candidates[i].noise_multiplier;
    arguments.insert(arguments.end(), {"--set", s.noise_key + "=" + sigma.str()});
  }
  if (!arguments.empty()) {
    std::cout << "sweep: candidate " << i + 1 << " of " << s.candidates.size() << ": " << nlohmann::json(s.candidates[i].values).dump()
              << ", noise multiplier " << s.candidates[i].noise_multiplier << "\n";
    const int code = run_privdiff(global, arguments);
    if (code == exit_stopped) return false;
    if (code != exit_ok) {
      throw std::runtime_error("sweep: candidate " + std::to_string(i) + " failed (exit " + std::to_string(code) + "); fix "
                               "the cause and continue with privdiff sweep --resume " + dir.string());
    }
  }
  s.candidates[i].score = candidate_score(run_dir, s.score);
  s.candidates[i].done = true;
  return true;
}

struct SweepArgs {
  std::string recipe, out, resume, score, candidates = "truncated_negative_binomial";
  std::vector<std::string> params, overrides;
  double eta = 1, gamma = 0.25, mu = 4;
  std::int64_t count = 4, seed = 0, stop_after = -1;  ///< stop_after -1: run them all
  bool minimize = false, seeded = false;
  std::set<std::string> given;  ///< the options given on the command line: they win over the recipe's [sweep]
};

std::string key_of(const std::string& spec) { return spec.substr(0, spec.find('=')); }

// The recipe's [sweep] under the command line: an option given there wins, and a --param replaces the
// recipe's spec for the same key. A [sweep.params] spec that does not parse is reported at its line.
SweepArgs with_recipe_sweep(SweepArgs a, const GlobalOptions& global) {
  ComponentRegistry registry;
  const Recipe recipe = load_recipe(a.recipe, a.overrides, global, registry);
  if (!recipe.sweep) return a;
  const sdk::Config& o = recipe.sweep->options;
  auto from_recipe = [&](const char* option) { return a.given.count(option) == 0; };
  if (from_recipe("--score") && o.has("score")) a.score = o.get_string("score");
  if (from_recipe("--minimize")) a.minimize = o.get_bool("minimize");
  if (from_recipe("--candidates")) a.candidates = o.get_string("candidates");
  if (from_recipe("--eta")) a.eta = o.get_double("eta");
  if (from_recipe("--gamma")) a.gamma = o.get_double("gamma");
  if (from_recipe("--mu")) a.mu = o.get_double("mu");
  if (from_recipe("--count")) a.count = o.get_int("count");
  std::vector<std::string> params;
  for (const auto& spec : recipe.sweep->params) {
    const std::string key = key_of(spec);
    try {
      parse_sweep_parameter(spec);
    } catch (const std::invalid_argument& e) {
      throw RecipeError({recipe.diagnostic("sweep.params." + key, e.what())});
    }
    const bool replaced = std::any_of(a.params.begin(), a.params.end(), [&](const auto& p) { return key_of(p) == key; });
    if (!replaced) params.push_back(spec);
  }
  params.insert(params.end(), a.params.begin(), a.params.end());
  a.params = std::move(params);
  return a;
}

SweepState new_sweep(const SweepArgs& given, const GlobalOptions& global, fs::path& dir) {
  const SweepArgs a = with_recipe_sweep(given, global);
  if (a.score.empty() || a.params.empty()) {
    throw UsageError("sweep: give the searched keys and the score, with --param (at least one) and --score METRIC or in "
                     "the recipe's [sweep] table (docs/sweep.md)");
  }
  SweepState s;
  s.recipe = fs::absolute(a.recipe);
  s.recipe_sha256 = recipe_file_sha256(s.recipe);
  s.overrides = a.overrides;
  s.space = a.params;
  s.score = a.score;
  s.maximize = !a.minimize;
  if (a.seeded) {
    s.seed = static_cast<std::uint64_t>(a.seed);
    std::cout << "warning: --seed " << a.seed << " lets anyone who knows it redraw K and the candidates; the selection "
                 "theorem holds only while K is secret. Use it for tests; leave it out for a sweep you release\n";
  }
  try {
    s.count.kind = sdk::selection::count_kind(a.candidates);
    s.count.eta = a.eta, s.count.gamma = a.gamma, s.count.mu = a.mu, s.count.count = a.count;
    sdk::selection::check(s.count);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("sweep --candidates: ") + e.what());
  }
  dir = a.out.empty() ? fs::path("sweeps") / fs::path(a.recipe).stem() : fs::path(a.out);
  if (fs::exists(dir) && !fs::is_empty(dir)) {
    throw UsageError("sweep: " + dir.string() + " exists and is not empty (continue a sweep with --resume " + dir.string() + ")");
  }
  if (s.count.kind == sdk::selection::CandidateCount::Kind::fixed) {
    std::cout << "warning: a fixed number of candidates is everyone's habit and costs the composition of all "
              << s.count.count << " runs; a random count (truncated_negative_binomial, poisson) costs far less\n";
  }
  plan_sweep(s, global, std::cout);
  fs::create_directories(dir / "candidates");
  // sweep.json and the candidates' runs hold K and every score: owner-only (the release is copied out).
  fs::permissions(dir / "candidates", fs::perms::owner_all, fs::perm_options::replace);
  write_sweep_state(dir, s);  // before any candidate runs: resuming never draws again
  return s;
}

// A resumed sweep runs as it was planned: an option that would change the plan is refused, not ignored.
void refuse_plan_options_on_resume(const CLI::App& cmd) {
  for (const char* name : {"--param", "--score", "--minimize", "--candidates", "--eta", "--gamma", "--mu", "--count",
                           "--seed", "--set", "--out"}) {
    if (cmd.get_option(name)->count() > 0) {
      throw UsageError(std::string("sweep --resume continues the sweep as it was planned: ") + name + " cannot change "
                       "it (the candidates and their budget were fixed before the first ran); leave it out, or start "
                       "a new sweep");
    }
  }
}

SweepState resumed_sweep(const fs::path& dir) {
  SweepState s;
  try {
    s = read_sweep_state(dir);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("sweep --resume: ") + e.what());
  }
  if (!s.released) {
    try {
      check_recipe_unchanged(s);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("sweep --resume: ") + e.what());
    }
  }
  return s;
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Tune hyperparameters with the privacy of the search accounted: the best of a random number of DP runs");
  auto a = std::make_shared<SweepArgs>();
  cmd->add_option("RECIPE", a->recipe, "the recipe to tune (its [privacy] epsilon is the whole sweep's target)");
  cmd->add_option("--param", a->params, "a searched key: KEY=V1,V2,... or KEY=log:LOW:HIGH[:int] (repeatable)");
  cmd->add_option("--score", a->score, "the [[eval]] metric that selects the best candidate");
  cmd->add_flag("--minimize", a->minimize, "the lowest score is the best (default: the highest)");
  cmd->add_option("--candidates", a->candidates, "how many candidates: truncated_negative_binomial (default), poisson, fixed")
      ->check(CLI::IsMember({"truncated_negative_binomial", "poisson", "fixed"}));
  cmd->add_option("--eta", a->eta, "truncated negative binomial: eta (default 1: geometric)");
  cmd->add_option("--gamma", a->gamma, "truncated negative binomial: gamma (default 0.25: E[K] = 4 at eta 1)");
  cmd->add_option("--mu", a->mu, "poisson: the mean number of candidates (default 4)");
  cmd->add_option("--count", a->count, "fixed: the number of candidates (default 4)");
  auto* seed = cmd->add_option("--seed", a->seed,
                               "seed of K and of the hyperparameter draws, for tests (default: the OS's secure "
                               "randomness, never kept: the theorem needs K secret)");
  cmd->add_option("--set", a->overrides, "override a key for every candidate (repeatable)");
  cmd->add_option("--out", a->out, "sweep directory (default sweeps/<recipe name>)");
  cmd->add_option("--resume", a->resume, "continue the sweep in this directory (nothing is drawn again)");
  auto* stop_after = cmd->add_option("--stop-after-candidates", a->stop_after,
                                     "stop (exit 3) after running N candidates (0: before the first); continue with --resume");
  cmd->callback([a, cmd, seed, stop_after, &global, &exit_code] {
    a->seeded = seed->count() > 0;
    for (const char* name : {"--score", "--minimize", "--candidates", "--eta", "--gamma", "--mu", "--count"}) {
      if (cmd->get_option(name)->count() > 0) a->given.insert(name);
    }
    if (a->resume.empty() == a->recipe.empty()) throw UsageError("sweep: give a RECIPE to start a sweep, or --resume DIR");
    if (stop_after->count() > 0 && a->stop_after < 0) {
      throw UsageError("sweep --stop-after-candidates: expected a count >= 0, got " + std::to_string(a->stop_after));
    }
    if (a->seeded && a->seed < 0) throw UsageError("sweep --seed: expected a seed >= 0, got " + std::to_string(a->seed));
    if (!a->resume.empty()) refuse_plan_options_on_resume(*cmd);
    fs::path dir = a->resume;
    SweepState s = a->resume.empty() ? new_sweep(*a, global, dir) : resumed_sweep(dir);
    std::int64_t ran = 0;
    for (std::size_t i = 0; i < s.candidates.size() && !s.released; ++i) {
      if (s.candidates[i].done) continue;
      if (a->stop_after >= 0 && ran == a->stop_after) {
        std::cout << "sweep stopped after " << ran << " candidates; continue with: privdiff sweep --resume " << dir.string() << "\n";
        exit_code = exit_stopped;
        return;
      }
      if (!run_candidate(s, i, dir, global)) {
        std::cout << "continue with: privdiff sweep --resume " << dir.string() << "\n";
        exit_code = exit_stopped;
        return;
      }
      write_sweep_state(dir, s);
      ++ran;
    }
    if (!s.released) {
      release_sweep(s, dir, global, std::cout);
      write_sweep_state(dir, s);
    }
    fs::remove_all(dir / "candidates");  // after the release is recorded: never a model left unreleased and undeleted
    std::cout << "sweep: epsilon " << s.epsilon << " at delta " << s.delta << " for the whole search (target "
              << s.target_epsilon << "); released: " << (dir / "privacy.json").string()
              << (s.selected ? " and " + (dir / "selected").string() : std::string()) << "\n";
    exit_code = exit_ok;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
