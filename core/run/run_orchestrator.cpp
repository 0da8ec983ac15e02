#include "run/run_orchestrator.hpp"

#include "run/atomic_file.hpp"
#include "run/image_grid.hpp"

#include <privdiff/privacy/calibration.hpp>
#include <privdiff/privacy/event_json.hpp>

#include <nlohmann/json.hpp>

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <thread>

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

RunSummary RunOrchestrator::run(const fs::path& run_dir, std::ostream& log) {
  std::error_code ec;
  if (fs::exists(run_dir, ec) && !(fs::is_directory(run_dir, ec) && fs::is_empty(run_dir, ec))) {
    throw std::runtime_error("run directory " + run_dir.string() +
                             " already exists and is not empty; choose another --out (nothing was changed)");
  }
  fs::create_directories(run_dir, ec);
  if (ec) throw std::runtime_error("cannot create run directory " + run_dir.string() + ": " + ec.message());

  const auto threads = recipe_.run.get_int("threads");
  at::set_num_threads(threads > 0 ? static_cast<int>(threads)
                                  : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  RunSummary summary;
  summary.run_dir = run_dir;
  if (components_.model) {
    std::int64_t total = 0, trainable = 0;
    for (const auto& p : components_.model->module().parameters()) {
      total += p.numel();
      if (p.requires_grad()) trainable += p.numel();
    }
    log << "model " << recipe_.model->id << ": " << total << " parameters (" << trainable << " trainable)\n";
  }
  std::ofstream metrics(run_dir / "metrics.jsonl", std::ios::app);
  write_file_atomically(run_dir / "recipe.toml", recipe_.to_toml());
  write_file_atomically(run_dir / "ledger.json", sdk::to_json(summary.ledger));

  std::unique_ptr<sdk::Dataset> data;  // opened once, for the stages and the sample grid's classes
  if (!components_.mechanisms.empty()) {
    if (!components_.model) throw std::runtime_error("stage: the recipe has stages but no [model]");
    data = open_dataset_(recipe_.data);
    plan_privacy(data->size(), log);
    for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
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
      // Progress: a line at most every 2 s (and at the end), and every step in metrics.jsonl.
      const auto start = std::chrono::steady_clock::now();
      auto last_print = start - std::chrono::seconds(10);
      std::int64_t examples = 0;
      const bool has_delta = recipe_.privacy.has("delta");
      context.report = [&](const sdk::StepReport& r) {
        examples += r.examples;
        const auto now = std::chrono::steady_clock::now();
        const double elapsed = std::chrono::duration<double>(now - start).count();
        const bool print = now - last_print > std::chrono::seconds(2) || r.step == r.total_steps;
        double epsilon = std::nan("");
        if (has_delta && mechanism.is_private() && (print || r.step == r.total_steps)) {
          epsilon = main_accountant().epsilon(summary.ledger.total(), recipe_.privacy.get_double("delta")).epsilon;
        }
        nlohmann::json line = {{"stage", name}, {"step", r.step}, {"loss", r.loss}, {"examples", r.examples},
                               {"seconds", elapsed}};
        if (!std::isnan(epsilon)) line["epsilon"] = epsilon;
        metrics << line.dump() << "\n";
        if (print) {
          last_print = now;
          const double eta = r.step > 0 ? elapsed / r.step * (r.total_steps - r.step) : 0;
          log << "  step " << r.step << "/" << r.total_steps << "  loss " << std::setprecision(4) << r.loss;
          if (!std::isnan(epsilon)) log << "  eps " << std::setprecision(3) << epsilon;
          log << "  " << std::setprecision(3) << (elapsed > 0 ? examples / elapsed : 0) << " ex/s  ETA "
              << std::setprecision(3) << eta << " s\n" << std::flush;
        }
      };
      try {
        mechanism.run(context);
      } catch (...) {
        // What was spent before the failure stays recorded.
        write_file_atomically(run_dir / "ledger.json", sdk::to_json(summary.ledger));
        throw;
      }
      write_file_atomically(run_dir / "ledger.json", sdk::to_json(summary.ledger));
    }
  }

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

  nlohmann::json report = {{"ledger", nlohmann::json::parse(sdk::to_json(summary.ledger))}};
  if (recipe_.privacy.has("delta")) {
    const double delta = recipe_.privacy.get_double("delta");
    report["delta"] = delta;
    nlohmann::json results = nlohmann::json::array();
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
        log << "privacy spent (" << id << "): epsilon " << format_epsilon(r.result.epsilon) << " at delta " << delta
            << "\n";
      }
      results.push_back(entry);
    }
    report["results"] = results;
  }
  write_file_atomically(run_dir / "privacy.json", report.dump(2) + "\n");
  return summary;
}

}  // namespace privdiff::core
