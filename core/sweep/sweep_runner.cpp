// privdiff sweep's orchestration: a new sweep's plan (the recipe's [sweep] under the command line's
// options), or a resumed one's state; the candidates run one after another as child privdiff runs; then
// the release, through the release gate. Candidates and the release are written to the sweep directory.
#include "sweep/sweep_runner.hpp"

#include "parallel/child_privdiff.hpp"
#include "run/recipe_loading.hpp"
#include "selection/sweep_space.hpp"
#include "sweep/sweep_planning.hpp"
#include "sweep/sweep_release.hpp"
#include "recipe/recipe_document.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <iostream>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// Runs privdiff itself with `arguments` and waits; its exit code (1 for a signal). The candidate run
// stops as a run does (a checkpoint, exit 3) on Ctrl-C, which reaches it from the terminal, on a SIGTERM
// sent to the sweep, which is passed on, and when the sweep dies (kill -9): never an orphan run left
// writing a directory that --resume would then write too (parallel/child_privdiff.hpp).
int run_privdiff(const std::vector<std::string>& plugin_paths, const std::vector<std::string>& arguments, std::ostream& log) {
  std::vector<std::string> argv{"privdiff"};
  for (const auto& path : plugin_paths) argv.insert(argv.end(), {"--plugin-path", path});
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  log.flush();
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
bool run_candidate(SweepState& s, std::size_t i, const fs::path& dir, const std::vector<std::string>& plugin_paths,
                   std::ostream& log) {
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
    log << "sweep: candidate " << i + 1 << " of " << s.candidates.size() << ": " << nlohmann::json(s.candidates[i].values).dump()
              << ", noise multiplier " << s.candidates[i].noise_multiplier << "\n";
    const int code = run_privdiff(plugin_paths, arguments, log);
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

std::string key_of(const std::string& spec) { return spec.substr(0, spec.find('=')); }

// The recipe's [sweep] under the command line: an option given there wins, and a --param replaces the
// recipe's spec for the same key. A [sweep.params] spec that does not parse is reported at its line.
SweepRequest with_recipe_sweep(SweepRequest a, const std::vector<std::string>& plugin_paths) {
  ComponentRegistry registry;
  const Recipe recipe = load_recipe(a.recipe, a.overrides, plugin_paths, registry);
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
  // The table's own count options count when the table's distribution does (--candidates not given).
  RecipeDocument document = RecipeDocument::load(a.recipe);
  (void)document.apply_overrides(a.overrides);  // their errors were reported by load_recipe above
  for (const char* key : {"eta", "gamma", "mu", "count"}) {
    const bool set = document.root()["sweep"][key] || document.override_text(std::string("sweep.") + key);
    if (set && from_recipe("--candidates")) a.set_count_options.insert(std::string("--") + key);
  }
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

// An option of the count (--eta, --gamma, --mu, --count) that the chosen distribution does not use:
// refused, since a user who set it believes it shapes K.
void refuse_unused_count_options(const SweepRequest& a, sdk::selection::CandidateCount::Kind kind) {
  using Kind = sdk::selection::CandidateCount::Kind;
  const std::set<std::string> used = kind == Kind::poisson ? std::set<std::string>{"--mu"}
                                     : kind == Kind::fixed ? std::set<std::string>{"--count"}
                                                           : std::set<std::string>{"--eta", "--gamma"};
  std::set<std::string> set = a.set_count_options;
  set.insert(a.given.begin(), a.given.end());
  for (const char* option : {"--eta", "--gamma", "--mu", "--count"}) {
    if (!set.count(option) || used.count(option)) continue;
    std::string uses;
    for (const auto& u : used) uses += (uses.empty() ? "" : " and ") + u;
    throw UsageError(std::string("sweep ") + option + " (or [sweep] " + (option + 2) + "): --candidates " + a.candidates +
                     " does not use it (it draws K with " + uses + "); remove it, or choose the distribution it belongs to");
  }
}

// What the user chose, before anything is planned: refused where it is incomplete or out of range.
SweepState chosen_sweep(const SweepRequest& a, std::ostream& log) {
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
    log << "warning: --seed " << a.seed << " lets anyone who knows it redraw K and the candidates; the selection "
                 "theorem holds only while K is secret. Use it for tests; leave it out for a sweep you release\n";
  }
  try {
    s.count.kind = sdk::selection::count_kind(a.candidates);
    refuse_unused_count_options(a, s.count.kind);
    s.count.eta = a.eta, s.count.gamma = a.gamma, s.count.mu = a.mu, s.count.count = a.count;
    sdk::selection::check(s.count);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("sweep --candidates: ") + e.what());
  }
  return s;
}

SweepState new_sweep(const SweepRequest& given, const std::vector<std::string>& plugin_paths, fs::path& dir,
                     std::ostream& log) {
  const SweepRequest a = with_recipe_sweep(given, plugin_paths);
  SweepState s = chosen_sweep(a, log);
  dir = a.out.empty() ? fs::path("sweeps") / fs::path(a.recipe).stem() : fs::path(a.out);
  if (fs::exists(dir) && !fs::is_empty(dir)) {
    throw UsageError("sweep: " + dir.string() + " exists and is not empty (continue a sweep with --resume " + dir.string() + ")");
  }
  if (s.count.kind == sdk::selection::CandidateCount::Kind::fixed) {
    log << "warning: a fixed number of candidates is everyone's habit and costs the composition of all "
              << s.count.count << " runs; a random count (truncated_negative_binomial, poisson) costs far less\n";
  }
  plan_sweep(s, plugin_paths, log);
  fs::create_directories(dir / "candidates");
  // sweep.json and the candidates' runs hold K and every score: owner-only (the release is copied out).
  fs::permissions(dir / "candidates", fs::perms::owner_all, fs::perm_options::replace);
  write_sweep_state(dir, s);  // before any candidate runs: resuming never draws again
  return s;
}

SweepState resumed_sweep(const fs::path& dir, const std::vector<std::string>& plugin_paths, std::ostream& log) {
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
    check_code_unchanged(s, plugin_paths, log);
  }
  return s;
}

}  // namespace

void check_recipe_sweep(const std::string& recipe, const std::vector<std::string>& overrides,
                        const std::vector<std::string>& plugin_paths, std::ostream& log) {
  SweepRequest request;
  request.recipe = recipe;
  request.overrides = overrides;
  SweepState s = chosen_sweep(with_recipe_sweep(request, plugin_paths), log);
  plan_budget(s, plugin_paths, log);
}

SweepResult run_sweep(const SweepRequest& request, const std::vector<std::string>& plugin_paths, std::ostream& log) {
  SweepResult r;
  r.dir = request.resume;
  r.state = request.resume.empty() ? new_sweep(request, plugin_paths, r.dir, log) : resumed_sweep(r.dir, plugin_paths, log);
  SweepState& s = r.state;
  for (std::size_t i = 0; i < s.candidates.size() && !s.released; ++i) {
    if (s.candidates[i].done) continue;
    if (request.stop_after >= 0 && r.ran == request.stop_after) {
      r.stopped = true;
      return r;
    }
    if (!run_candidate(s, i, r.dir, plugin_paths, log)) {
      r.stopped = true;
      return r;
    }
    write_sweep_state(r.dir, s);
    ++r.ran;
  }
  if (!s.released) {
    release_sweep(s, r.dir, plugin_paths, log);
    write_sweep_state(r.dir, s);
  }
  fs::remove_all(r.dir / "candidates");  // after the release is recorded: never a model left unreleased and undeleted
  return r;
}

}  // namespace privdiff::core
