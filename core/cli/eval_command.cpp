// privdiff eval SAMPLES [--labels FILE] [--evaluator ID ...] [--real DATASET] [--real-path DIR]
//                       [--set ID.KEY=VALUE | real.KEY=VALUE ...] [--epochs N] [--max-samples N] [--run DIR] [--json]
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "cli/device_option.hpp"
#include "data/open_dataset.hpp"
#include "evaluate/evaluation.hpp"
#include "recipe/core_schemas.hpp"
#include "recipe/recipe_validator.hpp"
#include "run/eval_record.hpp"
#include "run/run_ledger.hpp"
#include "run/sample_origin.hpp"
#include "util/cpu_threads.hpp"
#include "sample/sample_set.hpp"

#include <privdiff/config/value.hpp>

#include <algorithm>
#include <optional>
#include <iostream>
#include <sstream>

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

struct EvalArguments {
  std::string images, labels, real = "fashion-mnist", real_path, run, reference = "test", device = "auto";
  std::vector<std::string> evaluators, classifiers, overrides;  // the first two: comma-separated on the line
  std::int64_t epochs = 0, max_samples = 0, threads = 0, seed = 0;
  bool json = false, real_given = false, allow_private = false, allow_near_duplicates = false;
};

std::string quoted(const std::string& text) { return sdk::to_toml(sdk::ConfigValue{text}); }

/// The command's choices as the document validate_evaluation() checks (so --set values are checked
/// exactly like a recipe's [[eval]] keys, with the same messages).
RecipeDocument evaluation_document(const EvalArguments& args) {
  std::vector<std::string> ids = args.evaluators;
  ids.erase(std::remove(ids.begin(), ids.end(), std::string()), ids.end());
  if (ids.empty()) ids = default_evaluators();
  std::ostringstream text;
  text << "evaluators = " << sdk::to_toml(sdk::ConfigValue{ids}) << "\n";
  if (args.epochs > 0) text << "epochs = " << args.epochs << "\n";
  text << "[real]\n";
  // --real-path alone names the data by its directory (the idx plugin), not by --real's default.
  if (args.real_given || args.real_path.empty()) text << "dataset = " << quoted(args.real) << "\n";
  if (!args.real_path.empty()) text << "path = " << quoted(args.real_path) << "\n";
  RecipeDocument document = RecipeDocument::parse(text.str(), "privdiff eval");
  std::vector<std::string> overrides = args.overrides;
  if (!args.classifiers.empty()) {  // shorthand for --set dpdm_classifiers.classifiers=[...]
    overrides.push_back("dpdm_classifiers.classifiers=" + sdk::to_toml(sdk::ConfigValue{args.classifiers}));
  }
  if (auto problems = document.apply_overrides(overrides); !problems.empty()) throw RecipeError(std::move(problems));
  return document;
}

/// validate_evaluation() with the problems of the generated document put in the command's terms:
/// "--real cifar100: real.dataset: unknown dataset ..." rather than a line of a file nobody wrote.
EvaluationChoice checked_choice(const EvalArguments& args, const ComponentRegistry& registry) {
  try {
    return validate_evaluation(evaluation_document(args), registry);
  } catch (const RecipeError& e) {
    std::vector<Diagnostic> problems = e.diagnostics();
    for (auto& d : problems) {
      if (d.location.rfind("privdiff eval:", 0) != 0) continue;  // a --set value: already named
      const std::string& key = d.key_path;
      if (key.rfind("real.path", 0) == 0) d.location = "--real-path " + args.real_path;
      else if (key.rfind("real", 0) == 0) d.location = "--real " + args.real;
      else if (key.rfind("evaluators", 0) == 0) d.location = "--evaluator";
      else if (key == "epochs") d.location = "--epochs";
      else d.location = "eval";
    }
    throw RecipeError(std::move(problems));
  }
}

/// What decides the scores besides the images: kept with them, and what tells two evaluations of
/// one sample set apart (RUN/evals/).
nlohmann::json evaluation_settings(const EvalArguments& args, const EvaluationChoice& choice) {
  nlohmann::json evaluators = nlohmann::json::object();
  for (const auto& e : choice.evaluators) {
    nlohmann::json keys = nlohmann::json::object();  // as TOML writes them: 3, 0.5, "cnn", [1, 2]
    for (const auto& [key, value] : e.config.values()) keys[key] = sdk::to_toml(value);
    evaluators[e.id] = keys;
  }
  return {{"evaluators", evaluators}, {"real", args.real}, {"real_path", args.real_path},
          {"reference", args.reference}, {"max_samples", args.max_samples}, {"seed", args.seed}};
}

}  // namespace

CLI::App* add_eval_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "eval", "Score labelled images with evaluator plugins (accuracy of classifiers trained on them, FID, IS, "
              "precision/recall) against a real dataset");
  auto args = std::make_shared<EvalArguments>();
  cmd->add_option("SAMPLES", args->images, "IDX images file (e.g. from privdiff sample)")->required();
  cmd->add_option("--labels", args->labels, "IDX labels file (default: the ...-labels-idx1-ubyte file beside SAMPLES)");
  cmd->add_option("--evaluator", args->evaluators,
                  "evaluator plugin(s), repeatable or comma-separated (default: dpdm_classifiers,feature_cnn; "
                  "privdiff plugins list shows them all)")
      ->delimiter(',');
  cmd->add_option("--set", args->overrides,
                  "an evaluator's option (ID.KEY=VALUE, e.g. inception.weights=FILE) or the real data's "
                  "(real.KEY=VALUE, e.g. real.attribute=Smiling); repeatable")
      ->allow_extra_args(false);
  CLI::Option* real_option = cmd->add_option(
      "--real", args->real, "real dataset plugin the samples are scored against (fashion-mnist, mnist, idx, cifar10, celeba)");
  cmd->add_option("--real-path", args->real_path, "directory of the real dataset (its plugin's `path`)");
  cmd->add_option("--reference", args->reference,
                  "real split distribution metrics are fitted to: test (default; disjoint from training data) or "
                  "train (non-private statistics of it: the result carries a caveat)")
      ->check(CLI::IsMember({"test", "train"}));
  cmd->add_flag("--allow-private-data", args->allow_private,
               "score against real data that holds records the run trained on privately (refused otherwise): its "
               "scores are noise-free statistics of them, and the run's guarantee then carries a caveat in "
               "ledger.json, privacy.json, summary.json, account and compare");
  cmd->add_flag("--allow-near-duplicates", args->allow_near_duplicates,
               "score against real data that holds near-duplicates (not copies) of the run's private records, "
               "stating that they are independent pictures (as Fashion-MNIST's test split holds of some of its "
               "training images): the run's guarantee then carries a caveat that says so");
  cmd->add_option("--classifiers", args->classifiers,
                  "shorthand for --set dpdm_classifiers.classifiers=[...]: comma-separated logreg, mlp, cnn")
      ->delimiter(',');
  cmd->add_option("--epochs", args->epochs, "epochs of every evaluator that trains classifiers (scaled-down runs)")
      ->check(at_least(1));
  cmd->add_option("--max-samples", args->max_samples,
                  "use at most N images of SAMPLES, each class's first in its share of the set")
      ->check(at_least(1));
  cmd->add_option("--run", args->run, "run directory to record the result in (default: the run SAMPLES belongs to)");
  cmd->add_option("--seed", args->seed, "seed of the classifiers' training")->check(at_least(0));
  cmd->add_option("--threads", args->threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
  add_device_option(*cmd, args->device);
  cmd->add_flag("--json", args->json, "print one JSON object on stdout (progress goes to stderr)");
  cmd->callback([&global, &exit_code, args, real_option] {
    args->real_given = real_option->count() > 0;
    ComponentRegistry registry;
    load_plugins(registry, global, nullptr);
    EvaluationChoice choice = checked_choice(*args, registry);
    std::vector<NamedEvaluator> evaluators;
    try {  // e.g. inception without its weights file: input the user can fix
      evaluators = create_evaluators(choice.evaluators, registry);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("eval: ") + e.what());
    }
    EvaluationPlan plan;
    plan.real = std::move(*choice.real);
    plan.reference = args->reference;
    plan.max_samples = args->max_samples;
    plan.seed = static_cast<std::uint64_t>(args->seed);
    plan.device = resolve_device_option("eval", args->device);
    const fs::path images(args->images);
    fs::path labels(args->labels);
    if (labels.empty()) {
      labels = labels_file_beside(images);
      if (labels.empty()) {
        throw UsageError("eval: " + images.string() + " is not named ...-images-idx3-ubyte[.gz]; give its labels "
                         "with --labels FILE");
      }
    }
    use_cpu_threads(args->threads);
    std::ostream& log = args->json ? std::cerr : std::cout;
    // The images' runs (by place, and by the stamp a copy keeps): scored under their rules as with --run.
    const SampleOrigin origin = sample_origin({images, labels}, fs::path(args->run));
    for (const auto& how : origin.how) log << how << ": scored under that run's rules\n";
    const fs::path run = !args->run.empty() ? fs::path(args->run) : origin.runs.empty() ? fs::path() : origin.runs[0];
    std::optional<EvaluatedRunsGuard> guards;
    try {
      guards.emplace(run, origin, args->allow_private, args->allow_near_duplicates, record_key(),
                     earlier_run_data(registry), log);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("eval: ") + e.what());
    }
    if (!guards->empty()) {
      plan.check_split = [&guards](const std::string& split, const sdk::Dataset& data) { guards->check(split, data); };
    }
    // Unreadable or mismatched inputs, unknown real data and data an evaluator cannot score are bad
    // input (exit code 2); labels are checked against the real data's classes inside.
    sdk::LabelledImages set;
    nlohmann::json result;
    try {
      set = read_labelled_images(images, labels, 256);
      set.prompts = prompts_beside(images, set.count());  // what a text-image evaluator (clip_score) reads
      result = evaluate_image_set(set, plan, evaluators,
                                  [&registry](const DataSection& data) { return open_dataset(data, registry); }, log);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("eval: ") + e.what());
    } catch (const std::runtime_error& e) {
      if (!set.images.defined()) throw UsageError(std::string("eval: ") + e.what());
      throw;
    }
    result["samples"] = images.string();
    result["labels"] = labels.string();
    const std::string caveat = guards->caveat("eval.json");
    if (!caveat.empty()) result["caveats"].push_back(caveat);
    result["settings"] = evaluation_settings(*args, choice);
    if (!run.empty()) {
      record_evaluation(run, result, caveat, args->max_samples == 0 || args->max_samples >= set.count(), log);
    }
    for (const auto& caveat : result["caveats"]) log << "caveat: " << caveat.get<std::string>() << "\n";
    if (args->json) std::cout << result.dump() << "\n";
    exit_code = exit_ok;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
