// The reports of a finished run: samples.png, the [[eval]] evaluations, privacy.json, summary.json and
// the summary on the console.
#include "run/run_session.hpp"

#include "evaluate/evaluation.hpp"
#include "release/privacy_statement.hpp"
#include "util/image_grid.hpp"
#include "sample/sample_set.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/components/sampler.hpp>
#include <privdiff/data/pixels.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iomanip>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

void RunOrchestrator::sample_grid(RunSession& s) {
  // A class-by-row sample grid (10 samples per class, up to 10 classes) from the trained model.
  if (!components_.model || !components_.sampler) return;
  // Rows by the model's classes (public), never the data's.
  const std::int64_t classes = public_classes() > 0 ? std::min<std::int64_t>(10, public_classes()) : 10;
  sdk::SampleRequest request;
  request.count = classes * 10;
  request.labels = at::arange(classes, at::kLong).repeat_interleave(10);
  request.seed = static_cast<std::uint64_t>(recipe_.run.get_int("seed"));
  // A text-conditioned model draws the grid from the empty caption (its unconditional branch): no text
  // of the private captions reaches it; privdiff sample --prompts draws from prompts.
  const bool text = components_.model->conditions_on_text();
  if (text) request.captions.assign(static_cast<std::size_t>(request.count), "");
  const auto start = std::chrono::steady_clock::now();
  components_.model->module().eval();
  at::NoGradGuard no_grad;  // a sampler never needs autograd: the host turns it off for every sampler
  const at::Tensor images = components_.model->decode(components_.sampler->sample(*components_.model, request));
  s.grid_images = request.count;
  s.grid_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_image_grid(s.run_dir / "samples.png", images, classes, 10);
  s.log << "samples: " << (s.run_dir / "samples.png").string() << " (" << request.count << " images, "
        << std::setprecision(3) << s.grid_seconds << " s, " << recipe_.sampler->id
        << (text ? ", from the empty caption" : "") << ")\n";
}

void RunOrchestrator::run_evals(RunSession& s) {
  // [[eval]]: sample the trained model and score the samples, as `privdiff sample` + `privdiff eval`.
  for (std::size_t e = 0; e < recipe_.evals.size(); ++e) {
    const sdk::Config& entry = recipe_.evals[e].settings;
    SampleOptions sampling;
    sampling.count = entry.get_int("samples");
    sampling.num_classes = model_classes(recipe_.model->config);
    sampling.balanced = entry.get_string("labels") == "balanced";
    sampling.batch_size = entry.get_int("batch_size");
    sampling.seed = static_cast<std::uint64_t>(entry.get_int("seed"));
    // Its prompts, checked in pre-flight; a text-conditioned model without: the empty caption, as the grid.
    sampling.prompts = s.eval_prompts.at(e);
    if (sampling.prompts.empty() && components_.model->conditions_on_text()) sampling.prompts = {""};
    sampling.labels_from_prompts = entry.get_string("labels") == "prompts";
    const std::int64_t rows =
        sampling.labels_from_prompts ? static_cast<std::int64_t>(sampling.prompts.size()) : sampling.num_classes;
    const std::string from = " from " + std::to_string(sampling.prompts.size()) + " prompt(s)";
    s.log << "eval[" << e << "]: sampling " << sampling.count << " images" << (s.eval_prompts.at(e).empty() ? "" : from)
          << "\n";
    const SampleSet set = generate_samples(*components_.model, *components_.sampler, sampling, s.log);
    const SampleStamp stamp = stamp_of_run(s.run_dir);
    const fs::path images = write_sample_set(s.run_dir / "samples" / ("eval" + std::to_string(e)), set,
                                             sampling.balanced || sampling.labels_from_prompts, rows, &stamp);
    EvaluationPlan plan;
    plan.real = *eval_data();  // a dataset with splits (checked in pre-flight)
    plan.seed = sampling.seed;
    plan.device = s.device;
    // held_out: the test split, disjoint from the training split (preflight refused a run that
    // trains on it); training: the split the run trained on.
    const std::string split = plan.real.dataset.config.get_string("split");
    const bool training = entry.get_string("reference") == "training";
    plan.reference = training ? split : "test";
    nlohmann::json result =
        evaluate_image_set(sdk::LabelledImages{sdk::pixels_from_bytes(set.images), set.labels, set.prompts}, plan,
                           components_.evaluators.at(e), open_dataset_, s.log);
    if (training) {
      result["caveats"] = nlohmann::json::array(
          {"scored against the run's own training data (" + split + " split): " + train_reference_caveat()});
      s.summary.ledger.add_caveat("eval-" + std::to_string(e) + ".json: " + result["caveats"][0].get<std::string>());
    } else if (result["counts"].contains("real_train")) {
      // An evaluator read the training split on its own (benchmark_classifiers' selection = "real"):
      // a non-private use of the private data, which the run's guarantee must mention.
      std::string why = "an evaluator read the run's training data (" + split + " split)";
      for (const auto& caveat : result["caveats"]) why += "; " + caveat.get<std::string>();
      s.summary.ledger.add_caveat("eval-" + std::to_string(e) + ".json: " + why);
    }
    if (!s.eval_prompt_caveats.at(e).empty()) result["caveats"].push_back(s.eval_prompt_caveats.at(e));
    if (!s.eval_prompts.at(e).empty()) {
      result["prompts"] = s.eval_prompts.at(e);
      if (sampling.labels_from_prompts) {
        result["labels"] = "prompts: a sample's label is its prompt's index (text alignment)";
      }
    }
    result["samples"] = images.string();
    result["eval"] = e;
    write_file_atomically(s.run_dir / ("eval-" + std::to_string(e) + ".json"), result.dump(2) + "\n");
    write_file_atomically(s.run_dir / "eval.json", result.dump(2) + "\n");
    s.metrics.write(nlohmann::json{{"eval", result}});
    s.metrics.flush();
  }
}

void RunOrchestrator::write_reports(RunSession& s) {
  // The guarantee, by the release gate, from the ledger the run wrote; its caveats go into the ledger
  // before it is written, so ledger.json, privacy.json and summary.json carry the same ones.
  release::PrivacyStatement statement;
  if (recipe_.privacy.has("delta")) {
    release::NamedAccountants accountants;
    for (const auto& id : recipe_.accountant_ids) accountants.emplace_back(id, components_.accountants.at(id).get());
    statement = release::run_statement(s.summary.ledger, accountants, recipe_.privacy.get_double("delta"),
                                       approximation_allowed());
  }
  for (const auto& caveat : statement.caveats) s.summary.ledger.add_caveat(caveat);
  statement.caveats = s.summary.ledger.caveats();
  if (const auto data = s.datasets.find(s.private_data); data != s.datasets.end() && data->second) {
    statement.privacy_unit = release::privacy_unit(data->second->name(), data->second->has_captions());
  }
  s.write_ledger();  // with the caveats the evaluations may have added
  const nlohmann::json& results = statement.results;
  for (const auto& entry : results) {
    if (!entry.contains("epsilon")) continue;
    sdk::EpsilonResult r;
    r.epsilon = entry["epsilon"].get<double>();
    s.summary.privacy.push_back({entry["accountant"].get<std::string>(), r});
  }
  release::write_privacy_json(s.run_dir, release::run_privacy_json(statement, s.summary.ledger));
  const auto& caveats = s.summary.ledger.caveats();

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
    // over the stage's time in every session (absent where an old checkpoint did not record it).
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
                                {"training_cpu_seconds", s.training_cpu_seconds},
                                {"device", s.device.str()},
                                {"privacy", results},
                                {"caveats", caveats}};
  if (s.grid_images > 0 && s.grid_seconds > 0) {  // samples.png's rate: what `privdiff sample` may expect
    run_summary["sampling"] = {{"sampler", recipe_.sampler->id},
                               {"images", s.grid_images},
                               {"seconds", s.grid_seconds},
                               {"images_per_second", static_cast<double>(s.grid_images) / s.grid_seconds}};
  }
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

std::string RunOrchestrator::spending_note(const RunSession& s, std::int64_t planned_steps) const {
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

void RunOrchestrator::print_summary(const RunSession& s, std::int64_t trainable, std::int64_t total_steps,
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
    if (s.grid_images > 0 && s.grid_seconds > 0) {
      // The next step people take is thousands of samples: say what it costs at this rate.
      const double rate = static_cast<double>(s.grid_images) / s.grid_seconds;
      log << "  sampling    " << std::setprecision(3) << rate << " images/s here (" << recipe_.sampler->id
          << "): privdiff sample " << s.run_dir.string() << " --count 10000 takes about "
          << format_duration(10000 / rate);
      if (10000 / rate > 600) {  // over 10 minutes: also a count that takes about 5
        const std::int64_t fits = std::max<std::int64_t>(100, static_cast<std::int64_t>(300 * rate) / 100 * 100);
        log << ", --count " << fits << " about " << format_duration(static_cast<double>(fits) / rate);
      }
      log << "\n";
    }
  }
  if (!components_.mechanisms.empty()) log << "  checkpoint  " << s.checkpoint_path().string() << "\n";
}

}  // namespace privdiff::core
