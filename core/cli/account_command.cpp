// privdiff account: epsilon (or delta) of a DP-SGD schedule or a run's ledger under any
// accountant, and noise calibration for a target epsilon.
//
//   privdiff account [--accountant ID]... (--noise-multiplier S --sample-rate Q --steps T |
//                    --history S:Q:T ...) (--delta D | --epsilon E) [--conversion improved|classic] [--json]
//   privdiff account [--history S:Q:T ...] --sample-rate Q --steps T --epsilon E --delta D --calibrate
//                    (the smallest noise multiplier for the final schedule, after the history)
//   privdiff account RUN_DIR [--delta D] [--accountant ID]... [--json]
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "release/accounting_query.hpp"
#include "selection/sweep_report.hpp"
#include "sweep/sweep_account.hpp"
#include "recipe/suggest.hpp"
#include "util/atomic_file.hpp"
#include "run/run_guarantee.hpp"
#include "run/run_ledger.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/privacy/event_json.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

namespace privdiff::core::cli {

namespace {

using sdk::PrivacyEvent;

struct AccountArgs {
  std::string run_dir;
  std::vector<std::string> accountants;
  double noise_multiplier = 0, sample_rate = 0, delta = 0, epsilon = 0;
  std::int64_t steps = 0;
  std::vector<std::string> history;
  bool calibrate = false, json = false;
  std::string conversion = "improved";
  double tolerance = 0;
  CLI::Option *o_sigma = nullptr, *o_rate = nullptr, *o_steps = nullptr, *o_history = nullptr, *o_delta = nullptr,
              *o_epsilon = nullptr, *o_tolerance = nullptr;
};

struct Schedule {
  double sigma, q;
  std::int64_t steps;
};

std::string number(double v, int precision = 6) {
  if (std::isinf(v)) return "inf";
  std::ostringstream os;
  os << std::setprecision(precision) << v;
  return os.str();
}

Schedule parse_history_entry(const std::string& text) {
  std::istringstream in(text);
  std::string s, q, t;
  if (!std::getline(in, s, ':') || !std::getline(in, q, ':') || !std::getline(in, t) || t.find(':') != std::string::npos) {
    throw UsageError("--history '" + text + "': expected NOISE_MULTIPLIER:SAMPLE_RATE:STEPS, e.g. 1.1:0.01:5000");
  }
  try {
    std::size_t used_s, used_q, used_t;
    Schedule sch{std::stod(s, &used_s), std::stod(q, &used_q), std::stoll(t, &used_t)};
    if (used_s != s.size() || used_q != q.size() || used_t != t.size()) throw std::invalid_argument("trailing");
    return sch;
  } catch (const std::logic_error&) {
    throw UsageError("--history '" + text + "': expected NOISE_MULTIPLIER:SAMPLE_RATE:STEPS with numbers, e.g. 1.1:0.01:5000");
  }
}

// `where` prefixes the messages: "--history '1:2:3': " or "" for the single-schedule options.
void check_schedule(const Schedule& s, const std::string& where, bool need_sigma) {
  const bool single = where.empty();
  if (need_sigma && !(s.sigma > 0 && std::isfinite(s.sigma))) {
    throw UsageError(where + (single ? "--noise-multiplier" : "noise multiplier") + " must be > 0, got " + number(s.sigma));
  }
  if (!(s.q > 0 && s.q <= 1)) {
    throw UsageError(where + (single ? "--sample-rate" : "sample rate") + " must be in (0, 1], got " + number(s.q));
  }
  if (s.steps < 1) {
    throw UsageError(where + (single ? "--steps" : "steps") + " must be >= 1, got " + std::to_string(s.steps));
  }
}

std::vector<Schedule> parse_history(const std::vector<std::string>& entries) {
  std::vector<Schedule> schedules;
  for (const auto& h : entries) {
    schedules.push_back(parse_history_entry(h));
    check_schedule(schedules.back(), "--history '" + h + "': ", true);
  }
  return schedules;
}

PrivacyEvent schedule_event(const std::vector<Schedule>& schedules) {
  std::vector<PrivacyEvent> parts;
  for (const auto& s : schedules) {
    parts.push_back(PrivacyEvent::self_composed(
        PrivacyEvent::poisson_sampled(s.q, PrivacyEvent::gaussian(s.sigma)), s.steps));
  }
  return parts.size() == 1 ? parts.front() : PrivacyEvent::composed(std::move(parts));
}

std::string details_text(const nlohmann::json& j) {
  std::string out;
  for (const auto& [k, v] : j.items()) {
    if (k == "accountant" || k == "epsilon" || k == "delta" || k == "noise_multiplier" || k == "warnings" ||
        k == "upper_bound") {
      continue;
    }
    out += (out.empty() ? "" : ", ") + k + " " + (v.is_number() ? number(v.get<double>()) : v.dump());
  }
  return out;
}

void print_table(const nlohmann::json& results, bool calibrated) {
  std::cout << std::left << std::setw(20) << "accountant";
  if (calibrated) std::cout << std::setw(18) << "noise_multiplier";
  std::cout << std::setw(14) << "epsilon" << std::setw(12) << "delta" << "details\n";
  for (const auto& r : results) {
    std::cout << std::setw(20) << r["accountant"].get<std::string>();
    if (calibrated) std::cout << std::setw(18) << number(r["noise_multiplier"].get<double>(), 8);
    std::cout << std::setw(14) << number(r["epsilon"].get<double>()) << std::setw(12)
              << number(r["delta"].get<double>(), 4) << details_text(r) << "\n";
    if (r.contains("warnings")) {
      for (const auto& w : r["warnings"]) std::cout << "  warning: " << w.get<std::string>() << "\n";
    }
  }
}

// A sweep directory: its guarantee (core/sweep/sweep_account.hpp), printed.
bool account_sweep(const std::filesystem::path& dir, const AccountArgs& args) {
  if (!is_sweep_directory(dir)) return false;
  for (const auto& id : args.accountants) {
    if (id != "rdp") {
      throw UsageError("--accountant " + id + ": a sweep's guarantee is the selection theorem's, in RDP; only "
                       "--accountant rdp evaluates it");
    }
  }
  const nlohmann::json j = account_sweep_directory(dir);
  if (args.json) {
    std::cout << j.dump(2) << "\n";
    return true;
  }
  std::cout << "sweep " << dir.string() << ": epsilon " << j["epsilon"].get<double>() << " at delta "
            << j["delta"].get<double>() << " (the best of K candidate runs, K ~ " << j["candidates"].get<std::string>()
            << "; " << j["theorem"].get<std::string>() << ", order " << j["order"].get<double>() << "; recorded "
            << j["recorded_epsilon"].get<double>() << ", target " << j["target_epsilon"].get<double>() << ")\n";
  if (!j["released"].get<bool>()) std::cout << "not released yet: the release gate checks every candidate's ledger first\n";
  for (const auto& caveat : j["caveats"]) std::cout << "CAVEAT: " << caveat.get<std::string>() << "\n";
  return true;
}

void run_account(const GlobalOptions& global, AccountArgs& args) {
  const bool from_run = !args.run_dir.empty();
  const bool single = args.o_sigma->count() || args.o_rate->count() || args.o_steps->count();
  const bool history = args.o_history->count() > 0;
  const bool has_delta = args.o_delta->count() > 0, has_epsilon = args.o_epsilon->count() > 0;

  // --- what was spent
  PrivacyEvent event = PrivacyEvent::no_op();
  std::vector<std::string> caveats;  // a run's conditions on its guarantee (empty: unconditional)
  Schedule schedule{};
  if (from_run) {
    if (single || history || args.calibrate) {
      throw UsageError("RUN_DIR evaluates a run's ledger: do not combine it with --noise-multiplier, --sample-rate, "
                       "--steps, --history or --calibrate");
    }
    const std::filesystem::path dir(args.run_dir);
    RunLedger spent;
    try {
      // The run's own records only: its recipe (its delta) is the one checkpoint.pt was trained under, and
      // ledger.json and checkpoint.pt's ledger agree in every event (the release gate's checks).
      std::error_code ec;
      if (std::filesystem::is_regular_file(dir / "checkpoint.pt", ec) && std::filesystem::is_regular_file(dir / "recipe.toml", ec)) {
        check_checkpoint_of_run(dir / "checkpoint.pt", dir / "recipe.toml");
      }
      spent = read_run_ledger(dir);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
    // A run directory never under-reports: the longer of ledger.json and the checkpoint's ledger.
    if (!spent.note.empty()) std::cerr << "note: " << spent.note << "\n";
    event = spent.ledger.total();
    caveats = spent.ledger.caveats();
    if (!has_delta && !has_epsilon) {
      const auto delta = run_target_delta(dir);
      if (!delta) throw UsageError("the run sets no [privacy] delta; pass --delta");
      args.delta = *delta;
    }
  } else if (single && history && !args.calibrate) {
    throw UsageError("give either --noise-multiplier/--sample-rate/--steps or --history, not both (with "
                     "--calibrate, --history is what was spent before the --sample-rate/--steps schedule)");
  } else if (history && !args.calibrate) {
    event = schedule_event(parse_history(args.history));
  } else {
    // With --calibrate, `event` is the history composed before the schedule being calibrated.
    if (history) event = schedule_event(parse_history(args.history));
    if (!args.o_rate->count() || !args.o_steps->count() || (!args.calibrate && !args.o_sigma->count())) {
      throw UsageError(std::string("give ") + (args.calibrate ? "" : "--noise-multiplier, ") +
                       "--sample-rate and --steps (or --history S:Q:T, or a RUN_DIR)");
    }
    if (args.calibrate && args.o_sigma->count()) {
      throw UsageError("--calibrate finds the noise multiplier: do not pass --noise-multiplier");
    }
    schedule = {args.noise_multiplier, args.sample_rate, args.steps};
    check_schedule(schedule, "", !args.calibrate);
    if (!args.calibrate) event = schedule_event({schedule});
  }

  // --- the question
  if (args.calibrate) {
    if (!has_epsilon || !has_delta) throw UsageError("--calibrate needs the target --epsilon and --delta");
  } else if ((has_delta && has_epsilon) || (!has_delta && !has_epsilon && !from_run)) {
    // (a run directory without either is asked for epsilon at its own delta)
    throw UsageError("give exactly one of --delta (to get epsilon) or --epsilon (to get delta)");
  }
  const bool uses_delta = args.calibrate || !has_epsilon;
  if (uses_delta && !(args.delta > 0 && args.delta < 1)) {
    throw UsageError("--delta must be in (0, 1), got " + number(args.delta));
  }
  if (has_epsilon && !(args.epsilon > 0 && std::isfinite(args.epsilon))) {
    throw UsageError("--epsilon must be > 0, got " + number(args.epsilon));
  }
  if (args.conversion != "improved" && args.conversion != "classic") {
    throw UsageError("--conversion must be improved or classic, got '" + args.conversion + "'");
  }

  release::AccountingQuestion question;
  question.spent = event;
  question.delta = args.delta;
  if (has_epsilon && !args.calibrate) question.epsilon = args.epsilon;
  if (args.calibrate) {
    question.calibrate = release::CalibratedSchedule{schedule.q, schedule.steps, args.epsilon, std::nullopt};
    if (args.o_tolerance->count()) question.calibrate->tolerance = args.tolerance;
  }
  question.conversion = args.conversion;
  question.accountants = args.accountants;
  ComponentRegistry registry;
  load_plugins_of_runs(registry, global, from_run ? std::vector<std::string>{args.run_dir} : std::vector<std::string>{});
  const release::AccountingAnswer answer = release::answer(registry, question);
  const nlohmann::json& results = answer.results;
  const nlohmann::json& skipped = answer.skipped;

  if (args.json) {
    nlohmann::json out = {{"results", results}};
    if (from_run) out["caveats"] = caveats;
    if (!skipped.empty()) out["skipped"] = skipped;
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (from_run) std::cout << "ledger: " << event.to_string() << "\n";
  if (args.calibrate && history) std::cout << "after the history: " << event.to_string() << "\n";
  print_table(results, args.calibrate);
  for (const auto& s : skipped) {
    std::cout << "skipped " << s["accountant"].get<std::string>() << ": " << s["reason"].get<std::string>() << "\n";
  }
  for (const auto& caveat : caveats) std::cout << "CAVEAT: " << caveat << "\n";
}

}  // namespace

CLI::App* add_account_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* account = app.add_subcommand(
      "account", "Epsilon or delta of a DP-SGD schedule or a run's ledger; calibrate the noise for a target epsilon");
  auto args = std::make_shared<AccountArgs>();
  account->add_option("RUN_DIR", args->run_dir, "a run directory: evaluate its ledger.json");
  account->add_option("--accountant", args->accountants, "accountant id (repeatable; default: every installed one)")
      ->allow_extra_args(false);
  args->o_sigma = account->add_option("--noise-multiplier", args->noise_multiplier, "sigma / clipping norm");
  args->o_rate = account->add_option("--sample-rate", args->sample_rate, "Poisson sampling rate q = batch size / N");
  args->o_steps = account->add_option("--steps", args->steps, "number of steps");
  args->o_history = account->add_option("--history", args->history,
                                        "a schedule segment NOISE_MULTIPLIER:SAMPLE_RATE:STEPS (repeatable); with "
                                        "--calibrate, what was spent before the schedule being calibrated")
                        ->allow_extra_args(false);
  args->o_delta = account->add_option("--delta", args->delta, "report epsilon at this delta");
  args->o_epsilon = account->add_option("--epsilon", args->epsilon, "report delta at this epsilon (or the --calibrate target)");
  account->add_flag("--calibrate", args->calibrate,
                    "find the smallest noise multiplier with epsilon <= --epsilon at --delta");
  account->add_option("--conversion", args->conversion, "RDP to (eps, delta): improved (default) or classic");
  args->o_tolerance = account->add_option("--tolerance", args->tolerance,
                                          "relative tolerance of --calibrate (default 1e-10; 1e-4 for prv)");
  account->add_flag("--json", args->json, "print one JSON object");
  account->callback([&global, &exit_code, args] {
    if (args->run_dir.empty() || !account_sweep(args->run_dir, *args)) run_account(global, *args);
    exit_code = exit_ok;
  });
  return account;
}

}  // namespace privdiff::core::cli
