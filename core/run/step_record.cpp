#include "run/step_record.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>

namespace privdiff::core {

StepRecord::StepRecord(RunSession& session, Settings settings)
    : s_(session), settings_(std::move(settings)), latest_epsilon_(std::nan("")) {}

void StepRecord::operator()(const sdk::StepReport& r, const sdk::StateWriter& save_state) {
  ++s_.session_steps;
  examples_ += settings_.log_batch ? static_cast<double>(r.examples) : settings_.expected_batch;
  const auto now = std::chrono::steady_clock::now();
  const bool print = now - last_print_ > std::chrono::seconds(2) || r.step == r.total_steps;
  // epsilon so far on about 200 evenly spaced steps (deterministic, so a resumed run's metrics
  // equal an uninterrupted run's); the progress line shows the latest.
  const std::int64_t stride = std::max<std::int64_t>(1, r.total_steps / 200);
  double epsilon = std::nan("");
  if (settings_.epsilon_so_far && (r.step % stride == 0 || r.step == r.total_steps)) {
    epsilon = settings_.epsilon_so_far();
    latest_epsilon_ = epsilon;
  }
  write_metrics_line(r, epsilon);
  if (!r.engine.empty()) print_engine(r.engine);
  if (print) {  // also what makes the run watchable from its directory, every 2 s at most
    last_print_ = now;
    s_.write_ledger();  // first: never behind the checkpoint or any metrics line on disk
    s_.metrics.flush();
    print_progress(r, std::chrono::duration<double>(now - start_).count());
  }
  s_.adapt_threads(std::chrono::seconds(5));
  const bool stop = s_.stop_wanted();
  const bool due = settings_.checkpoint_every > 0 && r.step % settings_.checkpoint_every == 0;
  if ((stop || due) && r.step < r.total_steps) settings_.checkpoint(r.step, save_state);
  if (stop && r.step < r.total_steps) {
    throw RunStopped("stopped after " + std::to_string(s_.session_steps) + " steps (stage '" + settings_.stage +
                         "' step " + std::to_string(r.step) + "/" + std::to_string(r.total_steps) + "); checkpoint " +
                         s_.checkpoint_path().string(),
                     s_.session_steps);
  }
}

void StepRecord::write_metrics_line(const sdk::StepReport& r, double epsilon) {
  nlohmann::json line = {{"stage", settings_.stage}, {"step", r.step}};
  // A private step's wall time grows with its realised (Poisson) batch size, which is secret: its
  // time is published only as the stage's total (summary.json), or per step with private_diagnostics.
  if (settings_.log_batch) {
    line["seconds"] = s_.wall_now();
    line["loss"] = r.loss;
    line["examples"] = r.examples;
  }
  if (!std::isnan(epsilon)) line["epsilon"] = epsilon;
  if (!r.engine.empty()) line["engine"] = r.engine;
  if (!r.metrics.empty()) line["mechanism"] = r.metrics;  // released figures (StepReport::metrics)
  if (s_.writes()) s_.metrics.write(line);
}

void StepRecord::print_engine(const std::map<std::string, std::string>& engine) {
  s_.log << "  engine: " << engine.at("path") << ", chunks of " << engine.at("chunk");
  if (engine.count("norm_strategies")) s_.log << "; norms " << engine.at("norm_strategies");
  if (engine.count("seconds_per_example")) s_.log << " (measured per example: " << engine.at("seconds_per_example") << ")";
  s_.log << "\n";
}

void StepRecord::print_progress(const sdk::StepReport& r, double elapsed) {
  const double done = static_cast<double>(r.step - settings_.resume_step);
  const double eta = done > 0 ? elapsed / done * static_cast<double>(r.total_steps - r.step) : 0;
  s_.log << "  step " << r.step << "/" << r.total_steps;
  if (settings_.log_batch) s_.log << "  loss " << std::setprecision(4) << r.loss;
  if (!std::isnan(latest_epsilon_)) s_.log << "  eps " << std::setprecision(3) << latest_epsilon_;
  s_.log << "  " << std::setprecision(3) << (elapsed > 0 ? examples_ / elapsed : 0)
         << (settings_.log_batch ? " ex/s" : " expected ex/s") << "  ETA " << format_duration(eta) << "\n"
         << std::flush;
}

}  // namespace privdiff::core
