// The stage runner: runs each stage's mechanism with its context (data, ledger, seeds, release, resume)
// and what happens after every step (step_record.hpp), checkpoints at stage ends, and lets the model
// show what it fitted after a public stage.
#include "run/run_session.hpp"

#include "util/image_grid.hpp"
#include "run/step_record.hpp"
#include "sample/sample_set.hpp"

#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

void RunOrchestrator::write_checkpoint(RunSession& s, std::int64_t stage, std::int64_t step,
                                       const sdk::StateWriter& mechanism_state) {
  if (!s.writes()) return;  // one checkpoint per run, rank 0's (every rank holds the same state)
  s.metrics.flush();
  CheckpointPosition p;
  p.stage = stage;
  p.step = step;
  std::error_code ec;
  p.metrics_bytes = fs::file_size(s.metrics_path(), ec);
  p.wall_seconds = s.wall_now();
  p.cpu_seconds = s.cpu_now();
  p.stage_seconds = s.stage_seconds_now(components_.mechanisms.size());
  p.recipe_sha = s.recipe_sha;
  p.ledger_json = sdk::to_json(s.summary.ledger);
  p.noise_multipliers = noise_multipliers_;
  p.data_fingerprint = s.data_fingerprint;
  if (!s.options.libraries.empty()) p.component_libraries = to_json(s.options.libraries).dump();
  // The ledger first: a crash between the two writes leaves ledger.json ahead of the checkpoint
  // (over-reporting, which resume keeps), never behind it.
  s.write_ledger();
  save_checkpoint(s.checkpoint_path(), p, *components_.model, mechanism_state);
}

void RunOrchestrator::run_stages(RunSession& s) {
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

bool RunOrchestrator::reuse_release(RunSession& s, std::size_t i) const {
  // A stage that released before the run stopped (killed, or failed after its release) is not run
  // again: its queries are spent and on the ledger (written before the release), and querying the
  // private data again would spend them twice. Its release is reopened from the run directory.
  const std::string& name = recipe_.stages[i].name;
  const fs::path marker = released_directory(s, name) / release_marker;
  std::error_code ec;
  if (!fs::is_regular_file(marker, ec)) return false;
  std::int64_t recorded = 0;
  try {
    recorded = nlohmann::json::parse(read_file(marker)).at("ledger_steps").get<std::int64_t>();
  } catch (const std::exception& e) {
    throw std::runtime_error(marker.string() + ": unreadable (" + e.what() + ")");
  }
  if (s.summary.ledger.steps() < recorded) {  // never: the ledger is on disk before any release
    throw std::runtime_error(marker.string() + ": the release's cost is missing from the run's ledger (" +
                             std::to_string(s.summary.ledger.steps()) + " of " + std::to_string(recorded) + " steps)");
  }
  open_released(s, name, public_classes());
  s.log << "stage '" << name << "': released before this run stopped; reusing " << released_directory(s, name).string()
        << " (its cost is already on the ledger; the private data are not queried again)\n";
  return true;
}

void RunOrchestrator::run_stage(RunSession& s, std::size_t i) {
  auto& mechanism = *components_.mechanisms[i];
  const std::string& name = recipe_.stages[i].name;
  if (mechanism.released_examples(s.stage_size(i), public_classes()) > 0 && reuse_release(s, i)) return;
  s.log << "stage '" << name << "' (" << recipe_.stages[i].mechanism.id << ", data '" << recipe_.stages[i].data
        << "': " << s.stage_data(recipe_, i).name() << ")\n";
  mechanism.select_trainable(*components_.model);
  sdk::StageContext context{*components_.model, s.stage_data(recipe_, i), s.summary.ledger,
                            static_cast<std::uint64_t>(recipe_.run.get_int("seed")) + i, {}};
  context.stage_index = static_cast<std::int64_t>(i);
  context.collective = s.options.collective;
  context.num_classes = public_classes();
  if (const auto extra = mechanism.public_data_name()) context.public_data = s.datasets.at(*extra).get();
  if (mechanism.released_examples(s.stage_size(i), context.num_classes) > 0) {
    const std::int64_t classes = context.num_classes;
    context.release = [this, &s, name, classes](const at::Tensor& images, const at::Tensor& labels) {
      // A DP release: saved (images, labels, a grid) and opened as the dataset named after the stage.
      // The ledger first (fsync, rename): nothing released ever reaches the disk before its cost.
      s.write_ledger();
      test_kill_point("release");
      SampleSet set{sdk::pixels_to_bytes(images.to(at::kCPU)), labels.to(at::kCPU).to(at::kLong), {}};
      const fs::path prefix = released_directory(s, name) / "train";
      const SampleStamp stamp = stamp_of_run(s.run_dir);  // a copy of the release is still the run's
      write_sample_set(prefix, set, true, classes, &stamp);  // one class per row, as samples.png
      // Complete: a resume reuses it instead of querying the private data again (reuse_release).
      write_file_atomically(released_directory(s, name) / release_marker,
                            nlohmann::json{{"stage", name}, {"images", images.size(0)},
                                           {"ledger_steps", s.summary.ledger.steps()}}.dump() + "\n");
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
  StepRecord::Settings settings;
  settings.stage = name;
  settings.log_batch = !mechanism.is_private() || recipe_.run.get_bool("private_diagnostics");
  settings.expected_batch = expected_examples_per_step(mechanism, s.stage_size(i));
  settings.checkpoint_every = recipe_.run.get_int("checkpoint_every");
  settings.resume_step = context.resume_step;
  if (recipe_.privacy.has("delta") && mechanism.is_private()) {
    settings.epsilon_so_far = [this, &s] {
      return main_accountant().epsilon(s.summary.ledger.total(), recipe_.privacy.get_double("delta")).epsilon;
    };
  }
  settings.checkpoint = [this, &s, i](std::int64_t step, const sdk::StateWriter& state) {
    write_checkpoint(s, static_cast<std::int64_t>(i), step, state);
  };
  StepRecord record(s, std::move(settings));
  context.step_done = std::ref(record);
  // A resumed stage's clock goes on from its checkpoint's time (unknown in older checkpoints).
  const double earlier = !context.resume ? 0.0 : s.stage_seconds.count(i) ? s.stage_seconds.at(i) : std::nan("");
  s.stage_seconds.erase(i);
  s.stage_clock = RunSession::StageClock{i, earlier, std::chrono::steady_clock::now()};
  try {
    mechanism.run(context);
    const double seconds = s.stage_clock->seconds();
    s.stage_clock.reset();
    if (std::isfinite(seconds)) s.stage_seconds[i] = seconds;
  } catch (const RunStopped&) {
    throw;  // the checkpoint and ledger.json were written at the stop
  } catch (...) {
    s.write_ledger();  // what was spent before the failure stays recorded
    throw;
  }
}

void RunOrchestrator::show_after_public_stage(RunSession& s, std::size_t i) {
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

}  // namespace privdiff::core
