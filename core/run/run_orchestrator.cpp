#include "run/run_orchestrator.hpp"

#include "data/pixels.hpp"
#include "evaluate/evaluation.hpp"
#include "run/atomic_file.hpp"
#include "run/cpu_threads.hpp"
#include "run/image_grid.hpp"
#include "run/run_checkpoint.hpp"
#include "sample/sample_set.hpp"

#include <privdiff/privacy/calibration.hpp>
#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>

#include <chrono>
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

sdk::PrivacyEvent RunOrchestrator::plan_privacy(std::int64_t dataset_size, std::ostream& log) {
  auto& mechanisms = components_.mechanisms;
  if (!any_private(components_)) return sdk::PrivacyEvent::no_op();
  if (!recipe_.privacy.has("epsilon") || !recipe_.privacy.has("delta")) {
    throw std::runtime_error("privacy: this recipe has private stages; set [privacy] epsilon and delta");
  }
  const double target = recipe_.privacy.get_double("epsilon");
  const double delta = recipe_.privacy.get_double("delta");
  const sdk::Accountant& accountant = main_accountant();

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
      events.push_back(i == auto_stage ? mechanisms[i]->planned_events_with(sigma, dataset_size)
                                       : mechanisms[i]->planned_events(dataset_size));
    }
    return sdk::PrivacyEvent::composed(std::move(events));
  };
  if (auto_stage != mechanisms.size()) {
    std::vector<sdk::PrivacyEvent> others;
    for (std::size_t i = 0; i < mechanisms.size(); ++i) {
      if (i != auto_stage) others.push_back(mechanisms[i]->planned_events(dataset_size));
    }
    const double others_epsilon = accountant.epsilon(sdk::PrivacyEvent::composed(others), delta).epsilon;
    if (!(others_epsilon < target)) {
      throw std::runtime_error("privacy: the stages other than '" + recipe_.stages[auto_stage].name +
                               "' already spend epsilon " + format_epsilon(others_epsilon) + " of the target " +
                               format_epsilon(target) + "; nothing is left to calibrate its noise multiplier against");
    }
    const auto calibration = sdk::calibrate_noise_multiplier(accountant, planned, target, delta);
    mechanisms[auto_stage]->set_noise_multiplier(calibration.noise_multiplier);
    log << "calibrated stage '" << recipe_.stages[auto_stage].name << "' noise multiplier to "
        << calibration.noise_multiplier << " (epsilon " << format_epsilon(calibration.epsilon) << " <= "
        << target << " at delta " << delta << ")\n";
  }
  std::vector<sdk::PrivacyEvent> events;
  for (const auto& m : mechanisms) events.push_back(m->planned_events(dataset_size));
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

void prepare_run_dir(const fs::path& run_dir, bool resume) {
  std::error_code ec;
  if (resume) {
    if (!fs::is_regular_file(run_dir / "checkpoint.pt", ec)) {
      throw std::runtime_error("cannot resume " + run_dir.string() + ": it has no checkpoint.pt (was it started by "
                               "privdiff run, and did it reach its first checkpoint?)");
    }
    return;
  }
  if (fs::exists(run_dir, ec) && !(fs::is_directory(run_dir, ec) && fs::is_empty(run_dir, ec))) {
    throw std::runtime_error("run directory " + run_dir.string() +
                             " already exists and is not empty; choose another --out, or continue it with "
                             "privdiff run --resume " + run_dir.string() + " (nothing was changed)");
  }
  fs::create_directories(run_dir, ec);
  if (ec) throw std::runtime_error("cannot create run directory " + run_dir.string() + ": " + ec.message());
}

}  // namespace

RunSummary RunOrchestrator::run(const fs::path& run_dir, std::ostream& log, const RunOptions& options) {
  prepare_run_dir(run_dir, options.resume);
  use_cpu_threads(recipe_.run.get_int("threads"));
  RunSummary summary;
  summary.run_dir = run_dir;
  std::int64_t total_params = 0, trainable_params = 0;
  if (components_.model) {
    for (const auto& p : components_.model->module().parameters()) {
      total_params += p.numel();
      if (p.requires_grad()) trainable_params += p.numel();
    }
    log << "model " << recipe_.model->id << ": " << total_params << " parameters (" << trainable_params
        << " trainable)\n";
  }
  if (!recipe_.evals.empty() && components_.model && model_classes(recipe_.model->config) <= 0) {
    throw std::runtime_error("eval: [[eval]] scores labelled samples; the model is unconditional (num_classes = 0)");
  }
  // The run's recipe is its recipe.toml as first written; a resumed run is checked against it.
  const std::string recipe_text = options.resume ? read_file(run_dir / "recipe.toml") : recipe_.to_toml();
  const std::string recipe_sha = content_hash(recipe_text);
  const fs::path checkpoint_path = run_dir / "checkpoint.pt";
  const fs::path metrics_path = run_dir / "metrics.jsonl";
  auto write_ledger = [&] { write_file_atomically(run_dir / "ledger.json", sdk::to_json(summary.ledger)); };

  // Where to start: the beginning, or the checkpoint of an interrupted run.
  std::optional<LoadedCheckpoint> resumed;
  if (options.resume) {
    if (!components_.model) throw std::runtime_error("cannot resume: the recipe has no [model]");
    resumed = load_checkpoint(checkpoint_path, *components_.model);
    if (resumed->position.recipe_sha != recipe_sha) {
      throw std::runtime_error(
          "cannot resume " + run_dir.string() + ": its recipe.toml changed since the checkpoint was written "
          "(a resumed run must be the run that was started; start a new run for a changed recipe)");
    }
    summary.ledger = sdk::privacy_ledger_from_json(resumed->position.ledger_json);
    // Lines written after the checkpoint belong to steps that are about to be redone.
    std::error_code ec;
    fs::resize_file(metrics_path, resumed->position.metrics_bytes, ec);
    if (ec) throw std::runtime_error("cannot rewind " + metrics_path.string() + ": " + ec.message());
    log << "resuming at stage " << resumed->position.stage << ", step " << resumed->position.step
        << " (privacy spent so far is kept in the ledger)\n";
  } else {
    write_file_atomically(run_dir / "recipe.toml", recipe_text);
    write_ledger();
  }
  std::ofstream metrics(metrics_path, std::ios::app);
  double wall_seconds = resumed ? resumed->position.wall_seconds : 0.0;
  const auto session_start = std::chrono::steady_clock::now();
  auto wall_now = [&] {
    return wall_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - session_start).count();
  };

  std::unique_ptr<sdk::Dataset> data;  // opened once, for the stages and the sample grid's classes
  const std::int64_t checkpoint_every = recipe_.run.get_int("checkpoint_every");
  std::int64_t session_steps = 0;
  auto stop_wanted = [&] {
    return (options.stop_after_steps > 0 && session_steps >= options.stop_after_steps) ||
           (options.stop_requested && options.stop_requested());
  };
  if (!components_.mechanisms.empty()) {
    if (!components_.model) throw std::runtime_error("stage: the recipe has stages but no [model]");
    data = open_dataset_(recipe_.data);
    plan_privacy(data->size(), log);
    noise_multipliers_.clear();
    for (const auto& m : components_.mechanisms) {
      noise_multipliers_.push_back(m->is_private() ? single_noise_multiplier(m->planned_events(data->size()))
                                                   : std::nan(""));
    }
    if (resumed) {
      const auto& saved = resumed->position.noise_multipliers;
      for (std::size_t i = 0; i < noise_multipliers_.size(); ++i) {
        if (i >= saved.size() || !same_sigma(saved[i], noise_multipliers_[i])) {
          throw std::runtime_error("cannot resume: stage[" + std::to_string(i) + "]'s noise multiplier differs from "
                                   "the checkpoint's (did the dataset or a plugin change?)");
        }
      }
    }
    // checkpoint.pt and ledger.json as of `step` logical steps into stage `stage`.
    auto checkpoint = [&](std::int64_t stage, std::int64_t step, const sdk::StateWriter& mechanism_state) {
      metrics.flush();
      CheckpointPosition p;
      p.stage = stage;
      p.step = step;
      std::error_code ec;
      p.metrics_bytes = fs::file_size(metrics_path, ec);
      p.wall_seconds = wall_now();
      p.recipe_sha = recipe_sha;
      p.ledger_json = sdk::to_json(summary.ledger);
      p.noise_multipliers = noise_multipliers_;
      save_checkpoint(checkpoint_path, p, *components_.model, mechanism_state);
      write_ledger();
    };
    const std::int64_t first_stage = resumed ? resumed->position.stage : 0;
    for (std::size_t i = static_cast<std::size_t>(first_stage); i < components_.mechanisms.size(); ++i) {
      auto& mechanism = *components_.mechanisms[i];
      const std::string& name = recipe_.stages[i].name;
      if (!mechanism.is_private() && !data->is_public()) {
        throw std::runtime_error("stage[" + std::to_string(i) + "] '" + name + "': mechanism '" +
                                 recipe_.stages[i].mechanism.id + "' is not private and may only train on data "
                                 "marked public ([data] public = true); " + data->name() + " is private");
      }
      log << "stage '" << name << "' (" << recipe_.stages[i].mechanism.id << ")\n";
      sdk::StageContext context{*components_.model, *data, summary.ledger,
                                static_cast<std::uint64_t>(recipe_.run.get_int("seed")) + i, {}};
      if (resumed && static_cast<std::int64_t>(i) == resumed->position.stage && resumed->mechanism_state) {
        context.resume = resumed->mechanism_state.get();
        context.resume_step = resumed->position.step;
      }
      // Progress: a line at most every 2 s (and at the end), and every step in metrics.jsonl.
      const auto start = std::chrono::steady_clock::now();
      auto last_print = start - std::chrono::seconds(10);
      std::int64_t examples = 0;
      double latest_epsilon = std::nan("");
      const bool has_delta = recipe_.privacy.has("delta");
      context.step_done = [&](const sdk::StepReport& r, const sdk::StateWriter& save_state) {
        ++session_steps;
        examples += r.examples;
        const auto now = std::chrono::steady_clock::now();
        const double elapsed = std::chrono::duration<double>(now - start).count();
        const bool print = now - last_print > std::chrono::seconds(2) || r.step == r.total_steps;
        // epsilon so far on about 200 evenly spaced steps (deterministic, so a resumed run's metrics
        // equal an uninterrupted run's); the progress line shows the latest.
        const std::int64_t stride = std::max<std::int64_t>(1, r.total_steps / 200);
        double epsilon = std::nan("");
        if (has_delta && mechanism.is_private() && (r.step % stride == 0 || r.step == r.total_steps)) {
          epsilon = main_accountant().epsilon(summary.ledger.total(), recipe_.privacy.get_double("delta")).epsilon;
          latest_epsilon = epsilon;
        }
        nlohmann::json line = {{"stage", name}, {"step", r.step}, {"loss", r.loss}, {"examples", r.examples},
                               {"seconds", wall_now()}};
        if (!std::isnan(epsilon)) line["epsilon"] = epsilon;
        metrics << line.dump() << "\n";
        if (print) {
          last_print = now;
          const double done = static_cast<double>(r.step - context.resume_step);
          const double eta = done > 0 ? elapsed / done * static_cast<double>(r.total_steps - r.step) : 0;
          log << "  step " << r.step << "/" << r.total_steps << "  loss " << std::setprecision(4) << r.loss;
          if (!std::isnan(latest_epsilon)) log << "  eps " << std::setprecision(3) << latest_epsilon;
          log << "  " << std::setprecision(3) << (elapsed > 0 ? examples / elapsed : 0) << " ex/s  ETA "
              << format_duration(eta) << "\n" << std::flush;
        }
        const bool stop = stop_wanted();
        const bool due = checkpoint_every > 0 && r.step % checkpoint_every == 0;
        if ((stop || due) && r.step < r.total_steps) checkpoint(static_cast<std::int64_t>(i), r.step, save_state);
        if (stop && r.step < r.total_steps) {
          throw RunStopped("stopped after " + std::to_string(session_steps) + " steps (stage '" + name + "' step " +
                               std::to_string(r.step) + "/" + std::to_string(r.total_steps) + "); checkpoint " +
                               checkpoint_path.string(),
                           session_steps);
        }
      };
      try {
        mechanism.run(context);
      } catch (const RunStopped&) {
        throw;  // the checkpoint and ledger.json were written at the stop
      } catch (...) {
        write_ledger();  // what was spent before the failure stays recorded
        throw;
      }
      resumed.reset();  // later stages start fresh
      // A stage boundary: the next stage starts from here.
      checkpoint(static_cast<std::int64_t>(i + 1), 0, {});
      if (stop_wanted() && i + 1 < components_.mechanisms.size()) {
        throw RunStopped("stopped after " + std::to_string(session_steps) + " steps (end of stage '" + name +
                             "'); checkpoint " + checkpoint_path.string(),
                         session_steps);
      }
    }
  }
  const double training_seconds = wall_now();

  // A class-by-row sample grid (10 samples per class, up to 10 classes) from the trained model.
  if (components_.model && components_.sampler) {
    std::int64_t classes = 10;
    if (data) classes = std::min<std::int64_t>(10, data->num_classes());
    sdk::SampleRequest request;
    request.count = classes * 10;
    request.labels = at::arange(classes, at::kLong).repeat_interleave(10);
    request.seed = static_cast<std::uint64_t>(recipe_.run.get_int("seed"));
    const auto start = std::chrono::steady_clock::now();
    components_.model->module().eval();
    const at::Tensor images = components_.model->decode(components_.sampler->sample(*components_.model, request));
    write_image_grid(run_dir / "samples.png", images, classes, 10);
    log << "samples: " << (run_dir / "samples.png").string() << " (" << request.count << " images, "
        << std::setprecision(3) << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
        << " s, " << recipe_.sampler->id << ")\n";
  }

  // [[eval]]: sample the trained model and score the samples, as `privdiff sample` + `privdiff eval`.
  for (std::size_t e = 0; e < recipe_.evals.size(); ++e) {
    const sdk::Config& entry = recipe_.evals[e];
    SampleOptions sampling;
    sampling.count = entry.get_int("samples");
    sampling.num_classes = model_classes(recipe_.model->config);
    sampling.balanced = entry.get_string("labels") == "balanced";
    sampling.batch_size = entry.get_int("batch_size");
    sampling.seed = static_cast<std::uint64_t>(entry.get_int("seed"));
    log << "eval[" << e << "]: sampling " << sampling.count << " images\n";
    const SampleSet set = generate_samples(*components_.model, *components_.sampler, sampling, log);
    const fs::path images = write_sample_set(run_dir / "samples" / ("eval" + std::to_string(e)), set,
                                             sampling.balanced, sampling.num_classes);
    EvalOptions options;
    options.classifiers.clear();
    for (const auto& name : entry.get_string_list("classifiers")) options.classifiers.push_back(classifier_kind_from_string(name));
    options.epochs = entry.get_int("epochs");
    options.seed = sampling.seed;
    options.real_dataset = recipe_.data.has("dataset") ? recipe_.data.get_string("dataset") : "";
    options.real_path = recipe_.data.has("path") ? recipe_.data.get_string("path") : "";
    nlohmann::json result = evaluate_image_set(
        LabelledImages{pixels_from_bytes(set.images), set.labels}, options, log);
    result["samples"] = images.string();
    result["eval"] = e;
    write_file_atomically(run_dir / ("eval-" + std::to_string(e) + ".json"), result.dump(2) + "\n");
    write_file_atomically(run_dir / "eval.json", result.dump(2) + "\n");
    metrics << nlohmann::json{{"eval", result}}.dump() << "\n" << std::flush;
  }

  nlohmann::json report = {{"ledger", nlohmann::json::parse(sdk::to_json(summary.ledger))}};
  nlohmann::json results = nlohmann::json::array();
  if (recipe_.privacy.has("delta")) {
    const double delta = recipe_.privacy.get_double("delta");
    report["delta"] = delta;
    const sdk::PrivacyEvent spent = summary.ledger.total();
    for (const auto& id : recipe_.accountant_ids) {
      const auto& accountant = *components_.accountants.at(id);
      nlohmann::json entry = {{"accountant", id}};
      if (auto why = accountant.cannot_evaluate(spent); !why.empty()) {
        entry["error"] = why;
      } else {
        AccountantResult r{id, accountant.epsilon(spent, delta)};
        entry["epsilon"] = r.result.epsilon;
        for (const auto& [k, v] : r.result.details) entry[k] = v;
        summary.privacy.push_back(r);
      }
      results.push_back(entry);
    }
    report["results"] = results;
  }
  write_file_atomically(run_dir / "privacy.json", report.dump(2) + "\n");

  // summary.json: what `privdiff compare` tabulates; and the same, short, on the log.
  nlohmann::json stages = nlohmann::json::array();
  std::int64_t total_steps = 0;
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const auto& m = *components_.mechanisms[i];
    nlohmann::json stage = {{"name", recipe_.stages[i].name}, {"mechanism", recipe_.stages[i].mechanism.id},
                            {"private", m.is_private()}};
    if (data && m.is_private()) {
      const auto kinds = sdk::gaussian_steps(m.planned_events(data->size()));
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
    stages.push_back(stage);
  }
  nlohmann::json run_summary = {{"name", recipe_.run.get_string("name")},
                                {"stages", stages},
                                {"training_seconds", training_seconds},
                                {"privacy", results}};
  if (recipe_.privacy.has("epsilon")) run_summary["target_epsilon"] = recipe_.privacy.get_double("epsilon");
  if (recipe_.privacy.has("delta")) run_summary["delta"] = recipe_.privacy.get_double("delta");
  if (components_.model) {
    run_summary["model"] = {{"type", recipe_.model->id}, {"parameters", total_params},
                            {"trainable_parameters", trainable_params}};
  }
  write_file_atomically(run_dir / "summary.json", run_summary.dump(2) + "\n");

  log << "\nsummary\n";
  if (components_.model) {
    log << "  model       " << recipe_.model->id << ", " << total_params << " parameters (" << trainable_params
        << " trainable)\n";
  }
  log << "  training    " << components_.mechanisms.size() << " stage(s), " << format_duration(training_seconds);
  if (total_steps > 0) log << ", " << total_steps << " private steps";
  log << "\n";
  for (const auto& r : summary.privacy) {
    log << "  privacy     epsilon " << format_epsilon(r.result.epsilon) << " (" << r.accountant << ") at delta "
        << recipe_.privacy.get_double("delta") << "\n";
  }
  if (components_.model && components_.sampler) {
    log << "  samples     " << (run_dir / "samples.png").string() << " (10 per class, one class per row)\n";
  }
  if (!components_.mechanisms.empty()) log << "  checkpoint  " << checkpoint_path.string() << "\n";
  return summary;
}

}  // namespace privdiff::core
