#include "run/run_session.hpp"

#include "recipe/reproducible_noise.hpp"
#include "run/run_ledger.hpp"
#include "util/cpu_threads.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/device.hpp>
#include <privdiff/io/json_error.hpp>
#include <privdiff/parallel/collective.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

RunOrchestrator::RunOrchestrator(const Recipe& recipe, ComposedRun components, DatasetOpener open_dataset)
    : recipe_(recipe), components_(std::move(components)), open_dataset_(std::move(open_dataset)) {}

const sdk::Accountant& RunOrchestrator::main_accountant() const {
  const std::string& id = recipe_.privacy.get_string("accountant");
  auto it = components_.accountants.find(id);
  if (it == components_.accountants.end()) {
    throw std::runtime_error("privacy.accountant: accountant '" + id + "' is not loaded");
  }
  return *it->second;
}

bool RunOrchestrator::approximation_allowed() const {
  return recipe_.privacy.has("allow_approximate_accountant") && recipe_.privacy.get_bool("allow_approximate_accountant");
}


namespace {

// A finished run, as --resume finds it: whole (its summary readable, its model and ledger there), or
// refused as sample, export and compare refuse it (bad input: exit 2), before anything is said done.
RunSummary finished_run(const fs::path& run_dir, bool has_stages) {
  const std::string refused = "cannot resume " + run_dir.string() + ": it finished (summary.json), but ";
  try {
    std::ifstream in(run_dir / "summary.json");
    if (!nlohmann::json::parse(in).is_object()) throw RunRefused(refused + "its summary.json is not a JSON object");
  } catch (const nlohmann::json::exception& e) {
    throw RunRefused(refused + "its summary.json is damaged (" + privdiff::sdk::json_error_text(e) + "): restore it, or start a new run");
  }
  std::error_code ec;
  if (has_stages && !fs::is_regular_file(run_dir / "checkpoint.pt", ec)) {  // a plan-only run trains no model
    throw RunRefused(refused + "its checkpoint.pt is gone, so is its model (sample, weights export and init_from "
                               "need it): restore it, or start a new run");
  }
  RunSummary finished;
  finished.run_dir = run_dir;
  finished.ledger = resumed_ledger(run_dir).ledger;
  return finished;
}

}  // namespace

RunSummary RunOrchestrator::run(const fs::path& run_dir, std::ostream& log, const RunOptions& options) {
  std::error_code ec;
  if (options.resume && fs::is_regular_file(run_dir / "summary.json", ec)) {  // written last: it finished
    const RunSummary finished = finished_run(run_dir, !components_.mechanisms.empty());
    // Resumed to its end already: nothing is trained, sampled or rewritten.
    if (!options.collective || options.collective->rank() == 0) {
      log << run_dir.string() << " finished (summary.json): nothing to resume, nothing changed. More samples: "
          << "privdiff sample " << run_dir.string() << "; more training: a new run with [run] init_from = \""
          << run_dir.string() << "\" (its ledger is carried)\n";
    }
    return finished;
  }
  const bool restart = options.resume && killed_before_first_checkpoint(run_dir);
  RunOptions effective = options;
  if (restart) effective.resume = false;  // nothing to resume from: the run starts over
  std::string refused;  // a multi-process run's ranks decide together (agree_to_start)
  std::ostream quiet(nullptr);  // the ranks other than 0 log nothing (rank 0 speaks for the run)
  const bool writer = !options.collective || options.collective->rank() == 0;
  RunSession s(run_dir, writer ? log : quiet, effective);
  s.restart = restart;
  s.summary.run_dir = run_dir;
  try {
    if (writer) check_run_dir(run_dir, effective.resume, restart);
    const std::int64_t threads = recipe_.run.get_int("threads");
    use_cpu_threads(threads > 0 ? threads : cores_per_process(options.local_processes));
    // Told nothing: as many threads as other processes leave cores idle, measured as it goes. Not
    // with reproducible noise: the thread count changes the order of floating-point sums, so a count
    // that followed the machine's load would make two runs of one seed differ.
    const bool told_nothing = threads == 0 && options.local_processes == 1 && !options.collective &&
                              !std::getenv("OMP_NUM_THREADS");
    if (told_nothing && !draws_reproducible_noise(recipe_)) s.cpu_share.emplace(available_cores());
    s.device = resolve_run_device();
    if (s.device.is_cuda() && options.collective) s.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(options.local_rank));
    preflight(s);
    s.adapt_threads(std::chrono::milliseconds(200));  // the load seen during pre-flight
  } catch (const std::exception& e) {
    if (!options.collective) refuse(e);
    refused = e.what();
  }
  if (options.collective) agree_to_start(*options.collective, refused);
  if (components_.model) {
    components_.model->module().to(s.device);  // after init_from's weights; a checkpoint loads onto it
    s.log << "device " << s.device.str() << "\n";
  }
  open_run_directory(s);
  run_stages(s);
  if (!writer) return std::move(s.summary);  // samples, evaluations and reports: rank 0's
  s.training_seconds = s.wall_now();
  s.training_cpu_seconds = s.cpu_now();
  sample_grid(s);
  run_evals(s);
  write_reports(s);
  return std::move(s.summary);
}

void RunOrchestrator::check(std::ostream& log) {
  const RunOptions options;
  RunSession s({}, log, options);
  try {
    try {
      resolve_run_device();
    } catch (const sdk::engine::DeviceUnavailable& e) {  // a GPU recipe checked on a laptop
      log << "note: " << e.what() << " (privdiff run would refuse it on this machine)\n";
    }
    preflight(s);
    s.adapt_threads(std::chrono::milliseconds(200));  // the load seen during pre-flight
  } catch (const std::exception& e) {
    refuse(e);
  }
}

std::function<sdk::PrivacyEvent(double)> RunOrchestrator::planned_spending(std::ostream& log) {
  std::vector<std::size_t> calibrated;
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    if (components_.mechanisms[i]->needs_calibration()) calibrated.push_back(i);
  }
  if (calibrated.size() != 1) {
    throw RunRefused("privdiff sweep calibrates the noise of one stage: the recipe has " +
                     std::to_string(calibrated.size()) + " stages with noise_multiplier = \"auto\" (it needs exactly one)");
  }
  const RunOptions options;
  RunSession s({}, log, options);
  try {
    preflight(s);
  } catch (const std::exception& e) {
    refuse(e);
  }
  const std::size_t stage = calibrated.front();
  const sdk::PrivacyEvent carried = s.carry ? s.init->ledger.total() : sdk::PrivacyEvent::no_op();
  std::vector<sdk::PrivacyEvent> others{carried};
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    if (i != stage) others.push_back(components_.mechanisms[i]->planned_events(s.stage_size(i)));
  }
  sdk::Mechanism* mechanism = components_.mechanisms[stage].get();
  const std::int64_t size = s.stage_size(stage);
  return [others, mechanism, size](double sigma) {
    std::vector<sdk::PrivacyEvent> events = others;
    events.push_back(mechanism->planned_events_with(sigma, size));
    return sdk::PrivacyEvent::composed(std::move(events));
  };
}

void RunOrchestrator::refuse(const std::exception& e) const {
  if (const auto* bad = dynamic_cast<const sdk::KeyValueError*>(&e)) {
    throw RecipeError({recipe_.diagnostic(bad->key_path(), bad->problem())});
  }
  if (const auto* positioned = dynamic_cast<const RecipeError*>(&e)) throw *positioned;
  throw RunRefused(e.what());
}

c10::Device RunOrchestrator::resolve_run_device() const {
  try {
    return sdk::engine::resolve_device(recipe_.run.get_string("device"));
  } catch (const sdk::engine::DeviceUnavailable& e) {
    throw sdk::engine::DeviceUnavailable((recipe_.file.empty() ? "" : recipe_.file + ": ") + "[run] " + e.what());
  }
}

}  // namespace privdiff::core
