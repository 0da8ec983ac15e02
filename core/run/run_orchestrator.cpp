#include "run/run_orchestrator.hpp"

#include "data/dataset_identity.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/data/pixels.hpp>
#include <privdiff/engine/device.hpp>
#include "evaluate/evaluation.hpp"
#include "run/atomic_file.hpp"
#include "run/cpu_threads.hpp"
#include "run/image_grid.hpp"
#include "run/init_from.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_ledger.hpp"
#include "sample/sample_set.hpp"

#include <privdiff/privacy/calibration.hpp>
#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
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

namespace {

bool any_private(const ComposedRun& run) {
  for (const auto& m : run.mechanisms) {
    if (m->is_private()) return true;
  }
  return false;
}

std::string format_epsilon(double eps) {
  std::ostringstream os;
  os.precision(4);
  os << eps;
  return os.str();
}

}  // namespace

namespace {

/// sigma of a stage that spends one kind of Gaussian step; NaN otherwise (non-private, mixed).
double single_noise_multiplier(const sdk::PrivacyEvent& planned) {
  if (!sdk::non_gaussian_reason(planned).empty()) return std::nan("");
  const auto steps = sdk::gaussian_steps(planned);
  return steps.size() == 1 ? steps.front().noise_multiplier : std::nan("");
}

bool same_sigma(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b));
}

std::string format_duration(double seconds) {
  std::ostringstream os;
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s >= 3600) os << s / 3600 << " h " << (s % 3600) / 60 << " min";
  else if (s >= 60) os << s / 60 << " min " << s % 60 << " s";
  else os << std::setprecision(3) << seconds << " s";
  return os.str();
}

// A run killed after writing its recipe.toml but before its first checkpoint: --resume starts it
// over in place, keeping what its ledger.json says was spent.
bool killed_before_first_checkpoint(const fs::path& run_dir) {
  std::error_code ec;
  return fs::is_regular_file(run_dir / "recipe.toml", ec) && !fs::exists(run_dir / "checkpoint.pt", ec);
}

// Refuses a run directory that cannot be used, before anything is computed or written.
void check_run_dir(const fs::path& run_dir, bool resume, bool restart) {
  std::error_code ec;
  if (restart) return;
  if (resume) {
    if (!fs::is_regular_file(run_dir / "checkpoint.pt", ec)) {
      throw std::runtime_error("cannot resume " + run_dir.string() + ": it has no checkpoint.pt (was it started by "
                               "privdiff run, and did it reach its first checkpoint?)");
    }
    return;
  }
  if (fs::exists(run_dir, ec) && !fs::is_directory(run_dir, ec)) {
    throw std::runtime_error("run directory " + run_dir.string() + " is a file, not a directory; choose another --out");
  }
  if (fs::is_directory(run_dir, ec) && holds_only_temporary_files(run_dir)) {
    remove_stale_temporary_files(run_dir);  // a run killed while writing its first file wrote nothing
  }
  if (fs::exists(run_dir, ec) && !fs::is_empty(run_dir, ec)) {
    throw std::runtime_error("run directory " + run_dir.string() +
                             " already exists and is not empty; choose another --out, or continue it with "
                             "privdiff run --resume " + run_dir.string() + " (nothing was changed)");
  }
}

// Examples per logical step as planned (q N, of the stage's first Gaussian kind): what a
// private stage's progress shows instead of the realised batch sizes.
double expected_examples_per_step(const sdk::Mechanism& mechanism, std::int64_t dataset_size) {
  if (!mechanism.is_private()) return 0;
  const auto kinds = sdk::gaussian_steps(mechanism.planned_events(dataset_size));
  return kinds.empty() ? 0 : kinds.front().sampling_rate * static_cast<double>(dataset_size);
}

// A test hook: PRIVDIFF_TEST_KILL_AT=NAME makes the process die here as if killed -9, so that a test
// can stop a run between two writes (the crash-safety tests).
void test_kill_point(const char* name) {
  const char* at = std::getenv("PRIVDIFF_TEST_KILL_AT");
  if (at && std::strcmp(at, name) == 0) std::raise(SIGKILL);
}

constexpr const char* private_diagnostics_caveat =
    "metrics.jsonl records each private step's loss and realised batch size, computed without noise "
    "([run] private_diagnostics = true): publishing it is outside the guarantee";

}  // namespace

// One invocation of run() (or check()): what the phases share.
struct RunOrchestrator::Session {
  Session(fs::path dir, std::ostream& out, const RunOptions& opts) : run_dir(std::move(dir)), log(out), options(opts) {}

  fs::path run_dir;
  std::ostream& log;
  const RunOptions& options;
  RunSummary summary;
  // The recipe's datasets by name, opened once; the dataset private stages train on ("" if none).
  std::map<std::string, std::unique_ptr<sdk::Dataset>> datasets;
  std::map<std::string, DatasetIdentity> identities;  // by dataset name (data read from files, not releases)
  // Data released by a stage (DP-FETA's central images), by name -> the releasing stage. Opened
  // (into `datasets`) when that stage has run, or from the run directory on resume.
  std::map<std::string, std::size_t> released;
  bool is_released(const std::string& name) const { return released.count(name) > 0; }
  std::string private_data;
  std::string data_fingerprint;  // of every dataset the stages use (keyed), for the resume check
  std::string data_digest;       // the same, plain: for the ranks' check, never written
  std::int64_t total_params = 0;
  c10::Device device{c10::kCPU};  // [run] device, resolved
  std::vector<std::int64_t> stage_trainable;  // trainable parameters of each stage
  std::map<std::size_t, double> stage_seconds;  // training time of each stage in this session
  std::optional<InitSource> init;  // [run] init_from
  bool carry = false;              // its ledger is carried into this run's
  std::string carry_reason;
  std::vector<std::string> init_caveats;  // what [run] init_from_disjoint waived
  std::vector<RecordSet> record_sets;     // what the run trained on by content, with the ancestry's
  std::string recipe_sha;
  std::optional<LoadedCheckpoint> resumed;
  bool restart = false;  // --resume of a run killed before its first checkpoint: a fresh start in place
  std::ofstream metrics;
  double earlier_seconds = 0;  // training time of earlier sessions of this run
  std::chrono::steady_clock::time_point session_start = std::chrono::steady_clock::now();
  std::int64_t session_steps = 0;
  double training_seconds = 0;

  const sdk::Dataset& stage_data(const Recipe& recipe, std::size_t i) const { return *datasets.at(recipe.stages[i].data); }
  std::int64_t stage_size(std::size_t i) const { return stage_sizes.at(i); }
  std::vector<std::int64_t> stage_sizes;  // N of each stage's dataset
  fs::path checkpoint_path() const { return run_dir / "checkpoint.pt"; }
  fs::path metrics_path() const { return run_dir / "metrics.jsonl"; }
  double wall_now() const {
    return earlier_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - session_start).count();
  }
  /// Rank 0 of a multi-process run (or the only process): the one that writes the run directory.
  bool writes() const { return !options.collective || options.collective->rank() == 0; }
  /// Whether to stop here; in a multi-process run rank 0 decides for all (every rank calls this at
  /// the same points), so they stop at the same step.
  bool stop_wanted() const {
    const bool wanted = (options.stop_after_steps > 0 && session_steps >= options.stop_after_steps) ||
                        (options.stop_requested && options.stop_requested());
    return options.collective ? sdk::agree_with_rank0(*options.collective, wanted) : wanted;
  }
  void write_ledger() const {
    if (writes()) write_file_atomically(run_dir / "ledger.json", sdk::to_json(summary.ledger));
  }
};

sdk::PrivacyEvent RunOrchestrator::plan_privacy(Session& s) {
  auto& mechanisms = components_.mechanisms;
  std::ostream& log = s.log;
  // What an init_from source spent on this run's private data counts against the target too.
  const sdk::PrivacyEvent carried = s.carry ? s.init->ledger.total() : sdk::PrivacyEvent::no_op();
  if (!any_private(components_)) {
    if (s.carry && !s.init->ledger.entries().empty() && !recipe_.privacy.has("delta")) {
      throw std::runtime_error("privacy: the initial model (run.init_from) spent privacy; set [privacy] delta (and "
                               "epsilon) so this run reports it");
    }
    return carried;
  }
  if (!recipe_.privacy.has("epsilon") || !recipe_.privacy.has("delta")) {
    throw std::runtime_error("privacy: this recipe has private stages; set [privacy] epsilon and delta");
  }
  const double target = recipe_.privacy.get_double("epsilon");
  const double delta = recipe_.privacy.get_double("delta");
  const sdk::Accountant& accountant = main_accountant();
  warn_about_delta(s, delta);

  std::size_t auto_stage = mechanisms.size();
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    if (!mechanisms[i]->needs_calibration()) continue;
    if (auto_stage != mechanisms.size()) {
      throw std::runtime_error("stage[" + std::to_string(i) + "].noise_multiplier: only one stage may use \"auto\" (stage[" +
                               std::to_string(auto_stage) + "] already does)");
    }
    auto_stage = i;
  }
  // Everything the run plans to spend, with stage `auto_stage` at noise multiplier sigma.
  auto planned = [&](double sigma) {
    std::vector<sdk::PrivacyEvent> events;
    for (std::size_t i = 0; i < mechanisms.size(); ++i) {
      events.push_back(i == auto_stage ? mechanisms[i]->planned_events_with(sigma, s.stage_size(i))
                                       : mechanisms[i]->planned_events(s.stage_size(i)));
    }
    events.push_back(carried);
    return sdk::PrivacyEvent::composed(std::move(events));
  };
  if (auto_stage != mechanisms.size()) {
    std::vector<sdk::PrivacyEvent> others{carried};
    for (std::size_t i = 0; i < mechanisms.size(); ++i) {
      if (i != auto_stage) others.push_back(mechanisms[i]->planned_events(s.stage_size(i)));
    }
    const double others_epsilon = accountant.epsilon(sdk::PrivacyEvent::composed(others), delta).epsilon;
    if (!(others_epsilon < target)) {
      throw std::runtime_error("privacy: the stages other than '" + recipe_.stages[auto_stage].name +
                               "'" + (s.carry ? " and the initial model (run.init_from)" : "") + " already spend epsilon " + format_epsilon(others_epsilon) + " of the target " +
                               format_epsilon(target) + "; nothing is left to calibrate its noise multiplier against");
    }
    const auto calibration = sdk::calibrate_noise_multiplier(accountant, planned, target, delta);
    mechanisms[auto_stage]->set_noise_multiplier(calibration.noise_multiplier);
    log << "calibrated stage '" << recipe_.stages[auto_stage].name << "' noise multiplier to "
        << calibration.noise_multiplier << " (epsilon " << format_epsilon(calibration.epsilon) << " <= "
        << target << " at delta " << delta << ")\n";
  }
  std::vector<sdk::PrivacyEvent> events{carried};
  for (std::size_t i = 0; i < mechanisms.size(); ++i) events.push_back(mechanisms[i]->planned_events(s.stage_size(i)));
  const sdk::PrivacyEvent total = sdk::PrivacyEvent::composed(std::move(events));
  if (auto why = accountant.cannot_evaluate(total); !why.empty()) {
    throw std::runtime_error("privacy.accountant: " + why);
  }
  const double planned_epsilon = accountant.epsilon(total, delta).epsilon;
  if (planned_epsilon > target) {
    throw std::runtime_error("privacy: the stages plan to spend epsilon " + format_epsilon(planned_epsilon) +
                             " at delta " + format_epsilon(delta) + ", over the target " + format_epsilon(target) +
                             " by " + format_epsilon(planned_epsilon - target) +
                             "; raise noise_multiplier, lower the steps or the batch size, or use \"auto\"");
  }
  log << "planned privacy: epsilon " << format_epsilon(planned_epsilon) << " of " << target << " ("
      << recipe_.privacy.get_string("accountant") << ", delta " << delta << ")\n";
  return total;
}

namespace {

// The ranks of a multi-process run start training together or not at all: a refusal on any rank
// (rank 0's run directory check, a device) refuses the run on every rank, said once — by rank 0
// when it refused, else by the ranks that did — instead of leaving the others waiting.
void agree_to_start(sdk::Collective& ranks, const std::string& refused) {
  std::vector<at::Tensor> count{at::full({1}, refused.empty() ? 0 : 1, at::kLong)};
  ranks.all_reduce_sum(count);
  if (count[0].item<std::int64_t>() == 0) return;
  const bool rank0_refused = sdk::agree_with_rank0(ranks, !refused.empty());
  if (refused.empty()) {
    throw RunRefused(ranks.rank() == 0 ? "another rank refused the run (its message is above)" : "");
  }
  throw RunRefused(ranks.rank() == 0 || !rank0_refused ? refused : "");
}

// Every rank must run rank 0's run: the same resolved recipe (a rank started with other --set
// values would train another σ or schedule) and the same data (a node reading other files would
// train on records rank 0's ledger is not about). Checked on a hash of both, before anything is
// written; a rank that differs refuses the run on every rank.
void same_run_as_rank0(sdk::Collective& ranks, const std::string& recipe_and_data) {
  std::uint64_t h = 0;
  std::istringstream(content_hash(recipe_and_data)) >> std::hex >> h;
  at::Tensor rank0 = at::full({1}, static_cast<std::int64_t>(h), at::kLong);
  ranks.broadcast(rank0, 0);
  const bool differs = static_cast<std::uint64_t>(rank0.item<std::int64_t>()) != h;
  agree_to_start(ranks, differs ? "its recipe (with --set) or its data differ from rank 0's: every rank must run "
                                  "the same recipe on the same data"
                                : "");
}

}  // namespace

RunSummary RunOrchestrator::run(const fs::path& run_dir, std::ostream& log, const RunOptions& options) {
  const bool restart = options.resume && killed_before_first_checkpoint(run_dir);
  RunOptions effective = options;
  if (restart) effective.resume = false;  // nothing to resume from: the run starts over
  std::string refused;  // a multi-process run's ranks decide together (agree_to_start)
  std::ostream quiet(nullptr);  // the ranks other than 0 log nothing (rank 0 speaks for the run)
  const bool writer = !options.collective || options.collective->rank() == 0;
  Session s(run_dir, writer ? log : quiet, effective);
  s.restart = restart;
  s.summary.run_dir = run_dir;
  try {
    if (writer) check_run_dir(run_dir, effective.resume, restart);
    const std::int64_t threads = recipe_.run.get_int("threads");
    use_cpu_threads(threads > 0 ? threads : cores_per_process(options.local_processes));
    s.device = resolve_run_device();
    if (s.device.is_cuda() && options.collective) s.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(options.local_rank));
    preflight(s);
  } catch (const std::exception& e) {
    if (!options.collective) throw RunRefused(e.what());
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
  sample_grid(s);
  run_evals(s);
  write_reports(s);
  return std::move(s.summary);
}

void RunOrchestrator::check(std::ostream& log) {
  const RunOptions options;
  Session s({}, log, options);
  try {
    try {
      resolve_run_device();
    } catch (const sdk::engine::DeviceUnavailable& e) {  // a GPU recipe checked on a laptop
      log << "note: " << e.what() << " (privdiff run would refuse it on this machine)\n";
    }
    preflight(s);
  } catch (const std::exception& e) {
    throw RunRefused(e.what());
  }
}

c10::Device RunOrchestrator::resolve_run_device() const {
  try {
    return sdk::engine::resolve_device(recipe_.run.get_string("device"));
  } catch (const sdk::engine::DeviceUnavailable& e) {
    throw sdk::engine::DeviceUnavailable((recipe_.file.empty() ? "" : recipe_.file + ": ") + "[run] " + e.what());
  }
}

void RunOrchestrator::open_datasets(Session& s) {
  auto is_section = [&](const std::string& name) {
    return std::any_of(recipe_.datasets.begin(), recipe_.datasets.end(), [&](const DataSection& d) { return d.name == name; });
  };
  for (std::size_t i = 0; i < recipe_.stages.size(); ++i) {
    const StageSection& stage = recipe_.stages[i];
    if (stage.data.empty()) {
      throw std::runtime_error("data: the recipe's stages need data: add a [data] section with dataset = \"...\" "
                               "(e.g. \"fashion-mnist\"), or [data.NAME] sections that stages name with data = \"NAME\"");
    }
    if (is_section(stage.data)) {
      if (!s.datasets.count(stage.data)) s.datasets[stage.data] = open_dataset_(recipe_.dataset(stage.data));
      s.stage_sizes.push_back(s.datasets.at(stage.data)->size());
      continue;
    }
    // The data an earlier stage releases (the validator allows only earlier stages' names).
    std::size_t j = 0;
    while (j < i && recipe_.stages[j].name != stage.data) ++j;
    if (j == i) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + stage.name + "': no dataset or earlier stage is "
                               "named '" + stage.data + "'");
    }
    // How much is released depends on public configuration only (the model's classes), never on
    // the private labels.
    if (public_classes() < 1 && components_.mechanisms.at(j)->released_examples(s.stage_sizes.at(j), 1) > 0) {
      throw std::runtime_error("stage[" + std::to_string(j) + "] '" + recipe_.stages[j].name + "' releases images per "
                               "class: the model must be class-conditional (set [model] num_classes)");
    }
    const std::int64_t count = components_.mechanisms.at(j)->released_examples(s.stage_sizes.at(j), public_classes());
    if (count < 1) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + stage.name + "': data = '" + stage.data +
                               "' names stage '" + stage.data + "', whose mechanism '" +
                               recipe_.stages[j].mechanism.id + "' releases no data");
    }
    s.released[stage.data] = j;
    s.stage_sizes.push_back(count);
  }
  // What each dataset holds, by content: the data-use rules compare records, not names.
  for (const auto& [name, data] : s.datasets) {
    s.identities.emplace(name, dataset_identity(*data));
    check_data_fits_model(name, *data);
  }
}

std::int64_t RunOrchestrator::public_classes() const {
  return recipe_.model ? model_classes(recipe_.model->config) : 0;
}

void RunOrchestrator::check_data_fits_model(const std::string& name, const sdk::Dataset& data) const {
  // Input validation before anything is written (seen only by whoever holds the data): data the
  // model cannot take would otherwise fail mid-run, or train without a word on what it cannot be.
  if (!components_.model || data.size() == 0) return;
  const std::string& section = recipe_.dataset(name).path;
  const at::Tensor first = data.images(at::arange(1, at::kLong));
  if (!first.defined()) return;  // (test stand-ins without content)
  const auto shape = first.sizes().vec();
  const auto wanted = components_.model->image_shape();
  auto text = [](const std::vector<std::int64_t>& s) {
    std::string t;
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
    return t;
  };
  if (shape.size() != 4 || std::vector<std::int64_t>(shape.begin() + 1, shape.end()) != wanted) {
    throw std::runtime_error(section + ": " + data.name() + " holds " +
                             text(std::vector<std::int64_t>(shape.begin() + 1, shape.end())) + " images (channels x "
                             "height x width), but the model takes " + text(wanted) + " (set [model] image_channels "
                             "and image_size to match the data)");
  }
  // A label the model has no class for would fail mid-run, or train as the guidance null label.
  const std::int64_t classes = public_classes();
  if (classes < 1) return;
  const std::int64_t largest = data.labels(at::arange(data.size(), at::kLong)).max().item<std::int64_t>();
  if (largest >= classes) {
    throw std::runtime_error(section + ": " + data.name() + " has labels up to " + std::to_string(largest) +
                             ", but the model has num_classes = " + std::to_string(classes) + " (set [model] "
                             "num_classes to " + std::to_string(largest + 1) + ", or keep fewer classes with " +
                             section + ".classes)");
  }
}

fs::path RunOrchestrator::released_directory(const Session& s, const std::string& name) const {
  return s.run_dir / ("released-" + name);
}

void RunOrchestrator::open_released(Session& s, const std::string& name, std::int64_t classes) const {
  sdk::LabelledBytes bytes = sdk::read_idx_split(released_directory(s, name), "train");
  bytes.num_classes = classes;
  s.datasets[name] = std::make_unique<sdk::ImageDataset>(
      std::move(bytes), true, "data released by stage '" + name + "' (" + s.run_dir.string() + ")");
}

void RunOrchestrator::check_data_use(Session& s) const {
  // A run protects one private dataset: the ledger and epsilon are about it. Non-private stages may
  // only train on data that is public, and never on a record a private stage protects — naming
  // them twice, another path, plugin or copy, or `public = true` cannot make them public (records
  // are compared by content, data/dataset_identity.hpp).
  const auto& mechanisms = components_.mechanisms;
  std::size_t first_private = mechanisms.size();
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    if (!mechanisms[i]->is_private()) continue;
    if (s.is_released(recipe_.stages[i].data)) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "' trains privately on '" +
                               recipe_.stages[i].data + "', data released by an earlier stage: a release is already "
                               "private (train on it with a non-private mechanism, at no further cost)");
    }
    if (first_private == mechanisms.size()) {
      first_private = i;
      s.private_data = recipe_.stages[i].data;
    } else if (recipe_.stages[i].data != s.private_data) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "' trains privately on '" +
                               recipe_.stages[i].data + "', but stage[" + std::to_string(first_private) + "] '" +
                               recipe_.stages[first_private].name + "' on '" + s.private_data + "': a run protects one "
                               "private dataset (its ledger and epsilon are about it); use one run per private dataset");
    }
  }
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    if (mechanisms[i]->is_private()) continue;
    if (s.is_released(recipe_.stages[i].data)) continue;  // a DP release: its cost is in the ledger
    const sdk::Dataset& data = s.stage_data(recipe_, i);
    const DataSection& section = recipe_.dataset(recipe_.stages[i].data);
    const std::string stage = "stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "': mechanism '" +
                              recipe_.stages[i].mechanism.id + "' is not private";
    if (!data.is_public()) {
      throw std::runtime_error(stage + " and may only train on data marked public ([" + section.path +
                               "] public = true, or a public dataset such as glyphs); " + data.name() + " is private");
    }
    if (first_private == mechanisms.size()) continue;
    const std::int64_t shared = shared_records(s.identities.at(section.name).records,
                                               s.identities.at(s.private_data).records);
    if (section.name == s.private_data || shared > 0) {
      throw std::runtime_error(stage + ", but stage[" + std::to_string(first_private) + "] '" +
                               recipe_.stages[first_private].name + "' trains privately on " +
                               (section.name == s.private_data
                                    ? "the same data (" + data.name() + ")"
                                    : "data that shares " + std::to_string(shared) + " of its records (" + data.name() +
                                          " and " + s.stage_data(recipe_, first_private).name() + " hold the same images)") +
                               ": data a private stage protects cannot also be public; train the non-private stage on "
                               "other data, or make it private");
    }
  }
}

void RunOrchestrator::check_parameter_selections(Session& s) {
  // Each stage's parameter selection must select something; counted for the log and summary.json.
  s.stage_trainable.clear();
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    try {
      components_.mechanisms[i]->select_trainable(*components_.model);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "': " + e.what());
    }
    std::int64_t n = 0;
    for (const auto& p : components_.model->module().parameters()) n += p.requires_grad() ? p.numel() : 0;
    s.stage_trainable.push_back(n);
    if (n != s.total_params) {
      s.log << "stage '" << recipe_.stages[i].name << "' trains " << n << " of " << s.total_params
            << " parameters (the rest stay frozen)\n";
    }
  }
}

RunData RunOrchestrator::run_data(const Session& s) const {
  // The private dataset, and the public ones by stage (releases are neither: already private).
  RunData data;
  if (!s.private_data.empty()) data.private_data = &s.identities.at(s.private_data);
  for (std::size_t i = 0; i < recipe_.stages.size(); ++i) {
    if (components_.mechanisms[i]->is_private() || s.is_released(recipe_.stages[i].data)) continue;
    data.public_data.push_back({"stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "'",
                                &s.identities.at(recipe_.stages[i].data)});
  }
  return data;
}

void RunOrchestrator::prepare_init_from(Session& s) {
  // What the initial model inherits (see init_from.hpp), decided on the data's content.
  const bool fresh = !s.options.resume;
  if (!recipe_.run.has("init_from")) return;
  if (!components_.model) throw std::runtime_error("run.init_from: the recipe has no [model] to initialise");
  std::error_code ec;
  if (!fresh && fs::is_regular_file(s.run_dir / "init_from.json", ec)) {
    // Resuming: what was decided when the run started, whatever became of the source since.
    s.init = read_recorded_init(s.run_dir / "init_from.json");
    s.carry = s.init->carried;
    s.carry_reason = s.init->reason;
    return;
  }
  s.init = read_init_source(recipe_.run.get_string("init_from"));
  const InitSource& src = *s.init;
  const InitDecision decision =
      decide_init_from(src, run_data(s), recipe_.run.get_bool("init_from_disjoint"), record_key());
  s.carry = decision.carry;
  // Rank 0 writes the ledger; a rank on another machine (another record key) may be unable to
  // compare what rank 0 could, so rank 0's decision is the run's.
  if (s.options.collective) s.carry = sdk::agree_with_rank0(*s.options.collective, s.carry);
  s.carry_reason = decision.reason;
  s.init_caveats = decision.caveats;
  if (fresh) {  // here, before anything is written: a model that does not fit is refused up front
    const std::string& mine_type = recipe_.model->id;
    if (src.model_type.empty() || src.model_type == mine_type) {
      load_initial_weights(src.checkpoint, *components_.model);
    } else if (torch::nn::Module* part = components_.model->part_initialised_by(src.model_type)) {
      load_initial_weights(src.checkpoint, *part);  // e.g. a latent model's autoencoder from an autoencoder run
      s.log << "init_from: the " << src.model_type << " run's weights fill its part of this " << mine_type
            << "; the rest keeps its initialisation\n";
    } else {
      throw std::runtime_error("run.init_from: " + src.run_dir.string() + " trained a " + src.model_type + " model; this "
                               "recipe's [model] is " + mine_type + ", which cannot start from one");
    }
    s.log << "init_from " << src.checkpoint.string() << ": " << s.carry_reason << "\n";
  }
}

const DataSection* RunOrchestrator::eval_data() const {
  // Samples are scored against the data the run protects, else the data of its last stage.
  if (recipe_.stages.empty()) return nullptr;
  for (std::size_t i = 0; i < recipe_.stages.size(); ++i) {
    if (components_.mechanisms[i]->is_private() && !recipe_.stages[i].data.empty()) {
      return &recipe_.dataset(recipe_.stages[i].data);
    }
  }
  return recipe_.stages.back().data.empty() ? nullptr : &recipe_.dataset(recipe_.stages.back().data);
}

void RunOrchestrator::check_eval_reference(Session&) const {
  const DataSection* data = eval_data();
  for (std::size_t e = 0; e < recipe_.evals.size() && data; ++e) {
    const auto& config = data->dataset.config;
    if (!config.has("split") || !config.has("path")) {
      throw std::runtime_error("eval[" + std::to_string(e) + "]: [[eval]] scores samples against the real images of "
                               "an IDX dataset (idx, fashion-mnist, mnist); the run's data '" + data->name + "' is " +
                               data->dataset.id + "; use privdiff eval with --real-path instead");
    }
    if (recipe_.evals[e].get_string("reference") == "held_out" && config.get_string("split") == "test") {
      throw std::runtime_error("eval[" + std::to_string(e) + "].reference: \"held_out\" scores against the test "
                               "split, but the run trains on it (" + data->path + ".split = \"test\"); set reference = "
                               "\"training\" to score against it anyway (the run then carries a caveat)");
    }
  }
}

void RunOrchestrator::preflight(Session& s) {
  if (components_.model) {
    for (const auto& p : components_.model->module().parameters()) s.total_params += p.numel();
    s.log << "model " << recipe_.model->id << ": " << s.total_params << " parameters\n";
  }
  if (!recipe_.evals.empty() && components_.model && model_classes(recipe_.model->config) <= 0) {
    throw std::runtime_error("eval: [[eval]] scores labelled samples; the model is unconditional (num_classes = 0)");
  }
  if (components_.mechanisms.empty()) {
    if (!recipe_.privacy.has("delta") && !recipe_.privacy.has("epsilon")) {
      throw std::runtime_error("the recipe has nothing to run: add [model] and [[stage]] sections to train, or "
                               "[privacy] delta to report a privacy plan (see examples/recipes)");
    }
    return;
  }
  if (!components_.model) throw std::runtime_error("stage: the recipe has stages but no [model]");
  if (s.options.collective && s.options.collective->world_size() > 1) {
    for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
      if (!components_.mechanisms[i]->supports_several_processes()) {
        throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "': mechanism '" +
                                 recipe_.stages[i].mechanism.id + "' runs in one process only; run this recipe "
                                 "without --nproc (or with --nproc 1)");
      }
    }
  }
  open_datasets(s);
  check_data_use(s);
  check_eval_reference(s);
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {  // e.g. a batch larger than the data
    try {
      components_.mechanisms[i]->planned_events_with(1.0, s.stage_size(i));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "': " + e.what());
    }
  }
  check_parameter_selections(s);
  prepare_init_from(s);
  plan_privacy(s);
  noise_multipliers_.clear();
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const auto& m = components_.mechanisms[i];
    noise_multipliers_.push_back(m->is_private() ? single_noise_multiplier(m->planned_events(s.stage_size(i)))
                                                 : std::nan(""));
  }
  warn_about_short_ema(s);
  warn_about_noise(s);
}

void RunOrchestrator::warn_about_noise(Session& s) const {
  // The best case of a private stage: T steps whose clipped mean gradients (norm <= C) all point
  // the same way add up to T C; the noise they carry adds up to a norm of about sigma C sqrt(d T) / B
  // (d trained parameters, expected batch B = q N). Where the ratio, sigma sqrt(d) / (B sqrt(T)),
  // nears 1, even a perfectly consistent signal is lost in the noise: said before training, with
  // the numbers a researcher can change (published: N, the recipe, sigma).
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const double sigma = noise_multipliers_[i];
    const bool trains = components_.mechanisms[i]->released_examples(s.stage_size(i), 1) == 0;  // not a release
    if (!components_.mechanisms[i]->is_private() || !trains || std::isnan(sigma) || i >= s.stage_trainable.size()) continue;
    const auto kinds = sdk::gaussian_steps(components_.mechanisms[i]->planned_events(s.stage_size(i)));
    if (kinds.size() != 1 || kinds.front().count < 1) continue;
    const double n = static_cast<double>(s.stage_size(i)), batch = kinds.front().sampling_rate * n;
    const double steps = static_cast<double>(kinds.front().count), d = static_cast<double>(s.stage_trainable[i]);
    const double ratio = sigma * std::sqrt(d) / (batch * std::sqrt(steps));
    s.log << "stage '" << recipe_.stages[i].name << "': " << s.stage_size(i) << " private records, expected batch "
          << format_epsilon(batch) << ", " << kinds.front().count << " steps, sigma " << format_epsilon(sigma)
          << ": noise-to-signal " << format_epsilon(ratio) << " at best (sigma sqrt(d) / (B sqrt(T)), d = "
          << s.stage_trainable[i] << " trained parameters)\n";
    if (ratio >= 0.3) {
      s.log << "warning: stage '" << recipe_.stages[i].name << "': the privacy noise is " << format_epsilon(ratio)
            << " times the largest signal its steps can add up to; expect samples that look like noise. More records, "
            << "a larger batch (q N), more steps or fewer trained parameters (e.g. train = \"attention\") lower it; "
            << "see the README, \"Small private datasets\"\n";
    }
  }
}

void RunOrchestrator::warn_about_delta(Session& s, double delta) const {
  // delta is the probability the guarantee fails outright; at 1/N a mechanism that publishes one
  // random record whole is (0, delta)-DP. The usual rule: well below 1/N.
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    if (!components_.mechanisms[i]->is_private()) continue;
    const double n = static_cast<double>(s.stage_size(i));
    if (delta * n >= 1) {
      s.log << "warning: privacy.delta " << delta << " is not below 1/N = " << format_epsilon(1 / n) << " (N = "
            << s.stage_size(i) << " private records): a mechanism that publishes one random record whole meets "
            << "(0, 1/N)-DP; choose delta well below 1/N (e.g. " << format_epsilon(std::pow(10.0, std::floor(std::log10(0.1 / n))))
            << ")\n";
    }
    return;
  }
}

void RunOrchestrator::warn_about_short_ema(Session& s) const {
  // An EMA of rate r averages over ~1/(1-r) steps; a shorter stage ends with weights that are
  // mostly its starting point (r^steps of them).
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const auto& config = recipe_.stages[i].mechanism.config;
    if (!config.has("ema")) continue;
    const double ema = config.get_double("ema");
    const auto steps = sdk::gaussian_steps(components_.mechanisms[i]->planned_events(s.stage_size(i)));
    std::int64_t n = config.has("steps") ? config.get_int("steps") : 0;
    for (const auto& k : steps) n = std::max(n, k.count);
    if (ema <= 0 || n <= 0 || static_cast<double>(n) * (1 - ema) >= 1) continue;
    s.log << "warning: stage '" << recipe_.stages[i].name << "': ema " << ema << " averages over ~"
          << std::llround(1 / (1 - ema)) << " steps but the stage has " << n << "; its final weights keep "
          << std::llround(100 * std::pow(ema, static_cast<double>(n))) << "% of the initial ones (lower ema, e.g. "
          << format_epsilon(std::max(0.0, 1 - 10.0 / static_cast<double>(n))) << ")\n";
  }
}

void RunOrchestrator::open_run_directory(Session& s) {
  // The run's recipe is its recipe.toml as first written; a resumed run is checked against it.
  const std::string recipe_text = s.options.resume ? read_file(s.run_dir / "recipe.toml") : recipe_.to_toml();
  s.recipe_sha = content_hash(recipe_text);
  // What the stages train on, for the checkpoint and the resume check (keyed: run directories may
  // be published) and for the ranks' check (plain, exchanged only).
  const RecordKey& key = record_key();
  for (const auto& [name, id] : s.identities) {  // one dataset: its fingerprint alone
    const std::string prefix = s.identities.size() == 1 ? "" : (s.data_fingerprint.empty() ? "" : "; ") + name + "=";
    s.data_fingerprint += prefix + id.fingerprint(key);
    s.data_digest += prefix + std::to_string(id.ordered_digest);
  }
  if (s.options.collective) same_run_as_rank0(*s.options.collective, s.recipe_sha + "|" + s.data_digest);
  if (!s.options.resume && !s.writes()) {
    // Another rank of a multi-process run: rank 0 writes the directory; this one only trains.
  } else if (!s.options.resume) {
    std::error_code ec;
    fs::create_directories(s.run_dir, ec);
    if (ec) throw std::runtime_error("cannot create run directory " + s.run_dir.string() + ": " + ec.message());
    write_file_atomically(s.run_dir / "recipe.toml", recipe_text);
    if (s.restart) {
      // Killed before its first checkpoint: the steps it took are redone and spent again; what it
      // spent stays (its ledger.json, carried entries included), its metrics start over.
      std::error_code ec;
      if (fs::is_regular_file(s.run_dir / "ledger.json", ec)) s.summary.ledger = read_run_ledger(s.run_dir).ledger;
      remove_stale_temporary_files(s.run_dir);
      fs::resize_file(s.metrics_path(), 0, ec);
      s.log << "no checkpoint yet: the run starts over in place; the privacy it spent stays in the ledger\n";
    }
    // What the run trains on, by content, before it trains: a run killed at any point is known to
    // a later run that starts from it.
    s.record_sets = run_record_sets(run_data(s), key, fs::absolute(s.run_dir).string(), s.init ? &*s.init : nullptr);
    write_file_atomically(s.run_dir / record_sets_file, record_sets_to_bytes(s.record_sets));
    if (s.init) initialise_from_source(s);
  } else {
    if (!components_.model) throw std::runtime_error("cannot resume: the recipe has no [model]");
    // Refusals here are bad input (exit 2), and nothing has been written yet.
    const std::string refused = "cannot resume " + s.run_dir.string() + ": ";
    try {
      s.resumed = load_checkpoint(s.checkpoint_path(), *components_.model);
    } catch (const std::runtime_error& e) {  // damaged, or another model's
      throw RunRefused(refused + e.what());
    }
    const CheckpointPosition& position = s.resumed->position;
    if (position.recipe_sha != s.recipe_sha) {
      throw RunRefused(refused + "its recipe.toml changed since the checkpoint was written (a resumed run "
                               "must be the run that was started; start a new run for a changed recipe)");
    }
    if (!position.data_fingerprint.empty() && position.data_fingerprint != s.data_fingerprint) {
      throw RunRefused(refused + "the data differs from the data it trained on (checkpoint: " +
                               position.data_fingerprint + "; now: " + s.data_fingerprint +
                               "); its ledger accounts for those records only");
    }
    // Data released by stages that finished before the checkpoint: from the run directory.
    for (const auto& [name, stage] : s.released) {
      if (static_cast<std::int64_t>(stage) < position.stage) {
        open_released(s, name, public_classes());
      }
    }
    const auto& saved = position.noise_multipliers;
    for (std::size_t i = 0; i < noise_multipliers_.size(); ++i) {
      if (i >= saved.size() || !same_sigma(saved[i], noise_multipliers_[i])) {
        throw RunRefused("cannot resume: stage[" + std::to_string(i) + "]'s noise multiplier differs from "
                                 "the checkpoint's (did the dataset or a plugin change?)");
      }
    }
    // Spent privacy never shrinks: ledger.json may also hold steps done after the checkpoint by a
    // run that then failed or was killed. Those stay spent, and their redone steps are spent again.
    const RunLedger spent = read_run_ledger(s.run_dir);
    s.summary.ledger = spent.ledger;
    if (!spent.note.empty()) s.log << spent.note << "; the steps redone from the checkpoint are spent again\n";
    if (s.writes()) {
      if (const int stale = remove_stale_temporary_files(s.run_dir); stale > 0) {
        s.log << "removed " << stale << " temporary file(s) left by the interrupted run\n";
      }
      // Lines written after the checkpoint belong to steps that are about to be redone.
      std::error_code ec;
      fs::resize_file(s.metrics_path(), position.metrics_bytes, ec);
      if (ec) throw std::runtime_error("cannot rewind " + s.metrics_path().string() + ": " + ec.message());
    }
    if (std::error_code ec; fs::is_regular_file(s.run_dir / record_sets_file, ec)) {
      try {
        s.record_sets = record_sets_from_bytes(read_file(s.run_dir / record_sets_file));
      } catch (const std::exception& e) {
        throw std::runtime_error(refused + (s.run_dir / record_sets_file).string() + ": " + e.what());
      }
    }
    s.earlier_seconds = position.wall_seconds;
    s.log << "resuming at stage " << position.stage << ", step " << position.step
          << " (privacy spent so far is kept in the ledger)\n";
  }
  if (recipe_.run.get_bool("private_diagnostics") && any_private(components_)) {
    s.summary.ledger.add_caveat(private_diagnostics_caveat);
  }
  s.write_ledger();
  if (s.writes()) s.metrics.open(s.metrics_path(), std::ios::app);
}

void RunOrchestrator::initialise_from_source(Session& s) {
  const InitSource& src = *s.init;  // its weights were loaded in pre-flight
  if (s.carry && s.summary.ledger.entries().empty()) {  // a restart's ledger already holds them
    for (const auto& entry : src.ledger.entries()) s.summary.ledger.record(entry);
    for (const auto& caveat : src.ledger.caveats()) s.summary.ledger.add_caveat("init_from: " + caveat);
  }
  for (const auto& caveat : s.init_caveats) s.summary.ledger.add_caveat(caveat);
  nlohmann::json record = {{"source", src.run_dir.string()},
                           {"checkpoint", src.checkpoint.string()},
                           {"checkpoint_hash", src.checkpoint_hash},
                           {"source_finished", src.finished},
                           {"carried", s.carry},
                           {"reason", s.carry_reason},
                           {"carried_ledger", nlohmann::json::parse(sdk::to_json(s.carry ? src.ledger : sdk::PrivacyLedger{}))}};
  write_file_atomically(s.run_dir / "init_from.json", record.dump(2) + "\n");
}

void RunOrchestrator::write_checkpoint(Session& s, std::int64_t stage, std::int64_t step,
                                       const sdk::StateWriter& mechanism_state) {
  if (!s.writes()) return;  // one checkpoint per run, rank 0's (every rank holds the same state)
  s.metrics.flush();
  CheckpointPosition p;
  p.stage = stage;
  p.step = step;
  std::error_code ec;
  p.metrics_bytes = fs::file_size(s.metrics_path(), ec);
  p.wall_seconds = s.wall_now();
  p.recipe_sha = s.recipe_sha;
  p.ledger_json = sdk::to_json(s.summary.ledger);
  p.noise_multipliers = noise_multipliers_;
  p.data_fingerprint = s.data_fingerprint;
  // The ledger first: a crash between the two writes leaves ledger.json ahead of the checkpoint
  // (over-reporting, which resume keeps), never behind it.
  s.write_ledger();
  save_checkpoint(s.checkpoint_path(), p, *components_.model, mechanism_state);
}

void RunOrchestrator::run_stages(Session& s) {
  const std::int64_t first_stage = s.resumed ? s.resumed->position.stage : 0;
  for (std::size_t i = static_cast<std::size_t>(first_stage); i < components_.mechanisms.size(); ++i) {
    run_stage(s, i);
    if (!components_.mechanisms[i]->is_private()) show_after_public_stage(s, i);
    s.resumed.reset();  // later stages start fresh
    // A stage boundary: the next stage starts from here.
    write_checkpoint(s, static_cast<std::int64_t>(i + 1), 0, {});
    if (s.stop_wanted() && i + 1 < components_.mechanisms.size()) {
      throw RunStopped("stopped after " + std::to_string(s.session_steps) + " steps (end of stage '" +
                           recipe_.stages[i].name + "'); checkpoint " + s.checkpoint_path().string(),
                       s.session_steps);
    }
  }
}

void RunOrchestrator::run_stage(Session& s, std::size_t i) {
  auto& mechanism = *components_.mechanisms[i];
  const std::string& name = recipe_.stages[i].name;
  s.log << "stage '" << name << "' (" << recipe_.stages[i].mechanism.id << ", data '" << recipe_.stages[i].data
        << "': " << s.stage_data(recipe_, i).name() << ")\n";
  mechanism.select_trainable(*components_.model);
  sdk::StageContext context{*components_.model, s.stage_data(recipe_, i), s.summary.ledger,
                            static_cast<std::uint64_t>(recipe_.run.get_int("seed")) + i, {}};
  context.stage_index = static_cast<std::int64_t>(i);
  context.collective = s.options.collective;
  context.num_classes = public_classes();
  if (mechanism.released_examples(s.stage_size(i), context.num_classes) > 0) {
    const std::int64_t classes = context.num_classes;
    context.release = [this, &s, name, classes](const at::Tensor& images, const at::Tensor& labels) {
      // A DP release: saved (images, labels, a grid) and opened as the dataset named after the stage.
      // The ledger first (fsync, rename): nothing released ever reaches the disk before its cost.
      s.write_ledger();
      test_kill_point("release");
      SampleSet set{sdk::pixels_to_bytes(images.to(at::kCPU)), labels.to(at::kCPU).to(at::kLong)};
      const fs::path prefix = released_directory(s, name) / "train";
      write_sample_set(prefix, set, false, classes);
      test_kill_point("released");
      open_released(s, name, classes);
      s.log << "released " << images.size(0) << " images as data '" << name << "': " << prefix.string()
            << "-grid.png\n";
    };
  }
  if (s.resumed && static_cast<std::int64_t>(i) == s.resumed->position.stage && s.resumed->mechanism_state) {
    context.resume = s.resumed->mechanism_state.get();
    context.resume_step = s.resumed->position.step;
  }
  // The realised batch size and the loss of a private step are computed without noise: they are
  // kept out of metrics.jsonl (a shared artefact) and off the console unless diagnostics are asked
  // for; the speed shown is then in expected examples (q N per logical step).
  const bool log_batch = !mechanism.is_private() || recipe_.run.get_bool("private_diagnostics");
  const double expected_batch = expected_examples_per_step(mechanism, s.stage_size(i));
  const std::int64_t checkpoint_every = recipe_.run.get_int("checkpoint_every");
  const bool has_delta = recipe_.privacy.has("delta");
  // Progress: a line at most every 2 s (and at the end), and every step in metrics.jsonl.
  const auto start = std::chrono::steady_clock::now();
  auto last_print = start - std::chrono::seconds(10);
  double examples = 0;
  double latest_epsilon = std::nan("");
  context.step_done = [&](const sdk::StepReport& r, const sdk::StateWriter& save_state) {
    ++s.session_steps;
    examples += log_batch ? static_cast<double>(r.examples) : expected_batch;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const bool print = now - last_print > std::chrono::seconds(2) || r.step == r.total_steps;
    // epsilon so far on about 200 evenly spaced steps (deterministic, so a resumed run's metrics
    // equal an uninterrupted run's); the progress line shows the latest.
    const std::int64_t stride = std::max<std::int64_t>(1, r.total_steps / 200);
    double epsilon = std::nan("");
    if (has_delta && mechanism.is_private() && (r.step % stride == 0 || r.step == r.total_steps)) {
      epsilon = main_accountant().epsilon(s.summary.ledger.total(), recipe_.privacy.get_double("delta")).epsilon;
      latest_epsilon = epsilon;
    }
    nlohmann::json line = {{"stage", name}, {"step", r.step}, {"seconds", s.wall_now()}};
    if (log_batch) {
      line["loss"] = r.loss;
      line["examples"] = r.examples;
    }
    if (!std::isnan(epsilon)) line["epsilon"] = epsilon;
    if (s.writes()) s.metrics << line.dump() << "\n";
    if (print) {  // also what makes the run watchable from its directory, every 2 s at most
      last_print = now;
      s.write_ledger();  // first: never behind the checkpoint or any metrics line on disk
      s.metrics.flush();
      const double done = static_cast<double>(r.step - context.resume_step);
      const double eta = done > 0 ? elapsed / done * static_cast<double>(r.total_steps - r.step) : 0;
      s.log << "  step " << r.step << "/" << r.total_steps;
      if (log_batch) s.log << "  loss " << std::setprecision(4) << r.loss;
      if (!std::isnan(latest_epsilon)) s.log << "  eps " << std::setprecision(3) << latest_epsilon;
      s.log << "  " << std::setprecision(3) << (elapsed > 0 ? examples / elapsed : 0)
            << (log_batch ? " ex/s" : " expected ex/s") << "  ETA " << format_duration(eta) << "\n" << std::flush;
    }
    const bool stop = s.stop_wanted();
    const bool due = checkpoint_every > 0 && r.step % checkpoint_every == 0;
    if ((stop || due) && r.step < r.total_steps) write_checkpoint(s, static_cast<std::int64_t>(i), r.step, save_state);
    if (stop && r.step < r.total_steps) {
      throw RunStopped("stopped after " + std::to_string(s.session_steps) + " steps (stage '" + name + "' step " +
                           std::to_string(r.step) + "/" + std::to_string(r.total_steps) + "); checkpoint " +
                           s.checkpoint_path().string(),
                       s.session_steps);
    }
  };
  const auto stage_start = std::chrono::steady_clock::now();
  try {
    mechanism.run(context);
    if (!context.resume) {
      s.stage_seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start).count();
    }
  } catch (const RunStopped&) {
    throw;  // the checkpoint and ledger.json were written at the stop
  } catch (...) {
    s.write_ledger();  // what was spent before the failure stays recorded
    throw;
  }
}

void RunOrchestrator::show_after_public_stage(Session& s, std::size_t i) {
  // Public (or DP-released) data only: what the model fits here is not noised. Before the stage's
  // checkpoint, so that a resumed run has it.
  const std::string& name = recipe_.stages[i].name;
  auto& module = components_.model->module();
  const bool training = module.is_training();
  module.eval();
  const auto figures = components_.model->after_public_stage(s.stage_data(recipe_, i));
  module.train(training);
  for (const auto& figure : figures) {
    if (!figure.images.defined() || figure.images.size(0) == 0 || !s.writes()) continue;
    const fs::path file = s.run_dir / (name + "-" + figure.name + ".png");
    const std::int64_t columns = std::max<std::int64_t>(1, figure.columns);
    const std::int64_t rows = (figure.images.size(0) + columns - 1) / columns;
    at::Tensor images = figure.images.to(at::kCPU);
    if (images.size(0) < rows * columns) {  // a short last row: black tiles
      auto padding = images.sizes().vec();
      padding[0] = rows * columns - images.size(0);
      images = at::cat({images, at::full(padding, -1.0, images.options())});
    }
    write_image_grid(file, images, rows, columns);
    s.log << figure.name << ": " << file.string() << "\n";
  }
}

void RunOrchestrator::sample_grid(Session& s) {
  // A class-by-row sample grid (10 samples per class, up to 10 classes) from the trained model.
  if (!components_.model || !components_.sampler) return;
  // Rows by the model's classes (public), never the data's.
  const std::int64_t classes = public_classes() > 0 ? std::min<std::int64_t>(10, public_classes()) : 10;
  sdk::SampleRequest request;
  request.count = classes * 10;
  request.labels = at::arange(classes, at::kLong).repeat_interleave(10);
  request.seed = static_cast<std::uint64_t>(recipe_.run.get_int("seed"));
  const auto start = std::chrono::steady_clock::now();
  components_.model->module().eval();
  const at::Tensor images = components_.model->decode(components_.sampler->sample(*components_.model, request));
  write_image_grid(s.run_dir / "samples.png", images, classes, 10);
  s.log << "samples: " << (s.run_dir / "samples.png").string() << " (" << request.count << " images, "
        << std::setprecision(3) << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
        << " s, " << recipe_.sampler->id << ")\n";
}

void RunOrchestrator::run_evals(Session& s) {
  // [[eval]]: sample the trained model and score the samples, as `privdiff sample` + `privdiff eval`.
  for (std::size_t e = 0; e < recipe_.evals.size(); ++e) {
    const sdk::Config& entry = recipe_.evals[e];
    SampleOptions sampling;
    sampling.count = entry.get_int("samples");
    sampling.num_classes = model_classes(recipe_.model->config);
    sampling.balanced = entry.get_string("labels") == "balanced";
    sampling.batch_size = entry.get_int("batch_size");
    sampling.seed = static_cast<std::uint64_t>(entry.get_int("seed"));
    s.log << "eval[" << e << "]: sampling " << sampling.count << " images\n";
    const SampleSet set = generate_samples(*components_.model, *components_.sampler, sampling, s.log);
    const fs::path images = write_sample_set(s.run_dir / "samples" / ("eval" + std::to_string(e)), set,
                                             sampling.balanced, sampling.num_classes);
    EvalOptions options;
    options.classifiers.clear();
    for (const auto& name : entry.get_string_list("classifiers")) options.classifiers.push_back(classifier_kind_from_string(name));
    options.epochs = entry.get_int("epochs");
    options.seed = sampling.seed;
    options.device = s.device;
    const DataSection& data = *eval_data();  // an IDX dataset (checked in pre-flight)
    options.real_dataset = data.dataset.id;
    options.real_path = data.dataset.config.get_string("path");
    const std::string split = data.dataset.config.get_string("split");
    // held_out: the test split, disjoint from the training split (preflight refused a run that
    // trains on it); training: the split the run trained on.
    options.reference = entry.get_string("reference") == "training" ? split : "test";
    nlohmann::json result = evaluate_image_set(
        LabelledImages{sdk::pixels_from_bytes(set.images), set.labels}, options, s.log);
    if (entry.get_string("reference") == "training") {
      result["caveats"] = nlohmann::json::array({"scored against the run's own training data (" +
                                                 split + " split): " +
                                                 train_reference_caveat()});
      s.summary.ledger.add_caveat("eval-" + std::to_string(e) + ".json: " + result["caveats"][0].get<std::string>());
    }
    result["samples"] = images.string();
    result["eval"] = e;
    write_file_atomically(s.run_dir / ("eval-" + std::to_string(e) + ".json"), result.dump(2) + "\n");
    write_file_atomically(s.run_dir / "eval.json", result.dump(2) + "\n");
    s.metrics << nlohmann::json{{"eval", result}}.dump() << "\n" << std::flush;
  }
}

void RunOrchestrator::write_reports(Session& s) {
  s.write_ledger();  // with the caveats the evaluations may have added
  const auto& caveats = s.summary.ledger.caveats();
  nlohmann::json report = {{"ledger", nlohmann::json::parse(sdk::to_json(s.summary.ledger))}, {"caveats", caveats}};
  nlohmann::json results = nlohmann::json::array();
  if (recipe_.privacy.has("delta")) {
    const double delta = recipe_.privacy.get_double("delta");
    report["delta"] = delta;
    const sdk::PrivacyEvent spent = s.summary.ledger.total();
    for (const auto& id : recipe_.accountant_ids) {
      const auto& accountant = *components_.accountants.at(id);
      nlohmann::json entry = {{"accountant", id}};
      if (auto why = accountant.cannot_evaluate(spent); !why.empty()) {
        entry["error"] = why;
      } else {
        AccountantResult r{id, accountant.epsilon(spent, delta)};
        entry["epsilon"] = r.result.epsilon;
        for (const auto& [k, v] : r.result.details) entry[k] = v;
        s.summary.privacy.push_back(r);
      }
      results.push_back(entry);
    }
    report["results"] = results;
  }
  write_file_atomically(s.run_dir / "privacy.json", report.dump(2) + "\n");

  // summary.json: what `privdiff compare` tabulates; and the same, short, on the log.
  nlohmann::json stages = nlohmann::json::array();
  std::int64_t total_steps = 0;
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const auto& m = *components_.mechanisms[i];
    nlohmann::json stage = {{"name", recipe_.stages[i].name}, {"mechanism", recipe_.stages[i].mechanism.id},
                            {"private", m.is_private()}, {"data", recipe_.stages[i].data}};
    if (i < s.stage_trainable.size()) stage["trainable_parameters"] = s.stage_trainable[i];
    if (!s.stage_sizes.empty() && m.is_private()) {
      const auto kinds = sdk::gaussian_steps(m.planned_events(s.stage_size(i)));
      std::int64_t steps = 0;
      for (const auto& k : kinds) steps += k.count;
      stage["steps"] = steps;
      total_steps += steps;
      if (kinds.size() == 1) {
        stage["noise_multiplier"] = kinds.front().noise_multiplier;
        stage["sampling_rate"] = kinds.front().sampling_rate;
      }
    }
    const auto& config = recipe_.stages[i].mechanism.config;
    for (const char* key : {"batch_size", "noise_multiplicity", "steps"}) {
      if (config.has(key) && !stage.contains(key)) stage[key] = config.get_int(key);
    }
    // Speed in expected examples (batch_size x steps: the realised count is private) per second,
    // for stages trained start to end in this session.
    if (s.stage_seconds.count(i) && stage.contains("batch_size") && stage.contains("steps") && s.stage_seconds[i] > 0) {
      stage["seconds"] = s.stage_seconds[i];
      stage["examples_per_second"] =
          stage["batch_size"].get<double>() * stage["steps"].get<double>() / s.stage_seconds[i];
    }
    stages.push_back(stage);
  }
  nlohmann::json run_summary = {{"name", recipe_.run.get_string("name")},
                                {"stages", stages},
                                {"training_seconds", s.training_seconds},
                                {"device", s.device.str()},
                                {"privacy", results},
                                {"caveats", caveats}};
  if (!s.data_fingerprint.empty()) run_summary["data"] = s.data_fingerprint;
  run_summary["ledger_steps"] = s.summary.ledger.steps();
  const std::string note = spending_note(s, total_steps);
  if (!note.empty()) run_summary["ledger_note"] = note;
  if (!s.record_sets.empty()) run_summary["data_use"] = data_use_json(s.record_sets);
  if (s.init) {
    run_summary["init_from"] = {{"source", s.init->run_dir.string()}, {"checkpoint_hash", s.init->checkpoint_hash},
                                {"carried", s.carry}, {"reason", s.carry_reason}};
  }
  if (any_private(components_)) run_summary["calibration_accountant"] = recipe_.privacy.get_string("accountant");
  if (!s.options.provenance.is_null()) run_summary["provenance"] = s.options.provenance;
  if (recipe_.privacy.has("epsilon")) run_summary["target_epsilon"] = recipe_.privacy.get_double("epsilon");
  if (recipe_.privacy.has("delta")) run_summary["delta"] = recipe_.privacy.get_double("delta");
  // The model's trainable parameters: those of the (last) private stage, else of the last stage.
  std::int64_t trainable = s.total_params;
  for (std::size_t i = 0; i < s.stage_trainable.size(); ++i) {
    if (components_.mechanisms[i]->is_private() || i + 1 == s.stage_trainable.size()) trainable = s.stage_trainable[i];
  }
  for (std::size_t i = 0; i < s.stage_trainable.size(); ++i) {
    if (components_.mechanisms[i]->is_private()) trainable = s.stage_trainable[i];
  }
  if (components_.model) {
    run_summary["model"] = {{"type", recipe_.model->id}, {"parameters", s.total_params},
                            {"trainable_parameters", trainable}};
  }
  write_file_atomically(s.run_dir / "summary.json", run_summary.dump(2) + "\n");

  print_summary(s, trainable, total_steps, note);
}

std::string RunOrchestrator::spending_note(const Session& s, std::int64_t planned_steps) const {
  // What the ledger holds beyond the planned steps: an init_from source's, and steps redone after an
  // interruption (spent again: what a killed run computed may have reached the disk).
  const std::int64_t carried = s.carry && s.init ? s.init->ledger.steps() : 0;
  const std::int64_t redone = s.summary.ledger.steps() - carried - planned_steps;
  std::string note;
  if (carried > 0) note += std::to_string(carried) + " carried from init_from";
  if (redone > 0) {
    note += (note.empty() ? "" : ", ") + std::to_string(redone) + " redone after an interruption and spent again";
  }
  return note;
}

void RunOrchestrator::print_summary(const Session& s, std::int64_t trainable, std::int64_t total_steps,
                                    const std::string& note) const {
  std::ostream& log = s.log;
  log << "\nsummary\n";
  if (components_.model) {
    log << "  model       " << recipe_.model->id << ", " << s.total_params << " parameters (" << trainable
        << " trained" << (any_private(components_) ? " privately" : "") << ")\n";
  }
  log << "  training    " << components_.mechanisms.size() << " stage(s), " << format_duration(s.training_seconds);
  if (total_steps > 0) log << ", " << total_steps << " private steps";
  if (!note.empty()) log << " (the ledger holds " << s.summary.ledger.steps() << ": " << note << ")";
  log << "\n";
  for (const auto& r : s.summary.privacy) {
    log << "  privacy     epsilon " << format_epsilon(r.result.epsilon) << " (" << r.accountant << ") at delta "
        << recipe_.privacy.get_double("delta") << "\n";
    const bool calibrated_with = r.accountant == recipe_.privacy.get_string("accountant");
    if (calibrated_with && recipe_.privacy.has("epsilon") && r.result.epsilon > recipe_.privacy.get_double("epsilon")) {
      log << "  NOTE        epsilon " << format_epsilon(r.result.epsilon) << " is over the target "
          << recipe_.privacy.get_double("epsilon") << (note.empty() ? "" : ": the ledger holds " + note) << "\n";
    }
  }
  for (const auto& caveat : s.summary.ledger.caveats()) log << "  CAVEAT      " << caveat << "\n";
  if (components_.model && components_.sampler) {
    log << "  samples     " << (s.run_dir / "samples.png").string() << " (10 per class, one class per row)\n";
  }
  if (!components_.mechanisms.empty()) log << "  checkpoint  " << s.checkpoint_path().string() << "\n";
}

}  // namespace privdiff::core
