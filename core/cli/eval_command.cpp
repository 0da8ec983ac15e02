// privdiff eval SAMPLES [--labels FILE] [--real fashion-mnist | --real-path DIR] [--classifiers logreg,mlp,cnn]
//                       [--epochs N] [--max-samples N] [--run DIR] [--json]
#include "cli/commands.hpp"
#include "cli/device_option.hpp"
#include "evaluate/evaluation.hpp"
#include "util/atomic_file.hpp"
#include "util/cpu_threads.hpp"
#include "sample/sample_set.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

/// The run a samples file belongs to: RUN/samples/PREFIX-images-idx3-ubyte.gz -> RUN.
fs::path run_of(const fs::path& images) {
  const fs::path dir = fs::absolute(images).parent_path();
  if (dir.filename() == "samples" && fs::is_regular_file(dir.parent_path() / "recipe.toml")) return dir.parent_path();
  return {};
}

}  // namespace

CLI::App* add_eval_command(CLI::App& app, const GlobalOptions&, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "eval", "Score labelled images: downstream accuracy on the real test set, Fréchet distance, precision/recall");
  struct Args {
    std::string images, labels, real = "fashion-mnist", real_path, classifiers = "logreg,mlp,cnn", run, reference = "test";
    std::int64_t epochs = 50, max_samples = 60000, threads = 0, seed = 0;
    bool json = false;
    std::string device = "auto";
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("SAMPLES", args->images, "IDX images file (e.g. from privdiff sample)")->required();
  cmd->add_option("--labels", args->labels, "IDX labels file (default: the ...-labels-idx1-ubyte file beside SAMPLES)");
  CLI::Option* real_option =
      cmd->add_option("--real", args->real, "real dataset the classifiers are tested on and features are fitted to");
  cmd->add_option("--real-path", args->real_path, "directory of the real dataset's IDX files");
  cmd->add_option("--reference", args->reference,
                  "real split the feature network, Fréchet distance and precision/recall use: test (default; disjoint "
                  "from training data) or train (non-private statistics of it: the result carries a caveat)")
      ->check(CLI::IsMember({"test", "train"}));
  cmd->add_option("--classifiers", args->classifiers, "comma-separated: logreg, mlp, cnn");
  cmd->add_option("--epochs", args->epochs, "epochs per downstream classifier (DPDM: 50)")->check(at_least(1));
  cmd->add_option("--max-samples", args->max_samples, "use at most N images of SAMPLES")->check(at_least(1));
  cmd->add_option("--run", args->run, "run directory to record the result in (default: the run SAMPLES belongs to)");
  cmd->add_option("--seed", args->seed, "seed of the classifiers' training")->check(at_least(0));
  cmd->add_option("--threads", args->threads, "CPU threads (default: all cores)")->check(at_least(0));
  add_device_option(*cmd, args->device);
  cmd->add_flag("--json", args->json, "print one JSON object on stdout (progress goes to stderr)");
  cmd->callback([&exit_code, args, real_option] {
    EvalOptions options;
    options.classifiers.clear();
    std::stringstream list(args->classifiers);
    for (std::string name; std::getline(list, name, ',');) {
      try {
        options.classifiers.push_back(classifier_kind_from_string(name));
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("eval --classifiers: ") + e.what());
      }
    }
    options.epochs = args->epochs;
    options.max_samples = args->max_samples;
    // --real-path alone names the data by its directory, not by --real's default (fashion-mnist).
    options.real_dataset = !args->real_path.empty() && real_option->count() == 0 ? "" : args->real;
    options.real_path = args->real_path;
    options.reference = args->reference;
    options.seed = static_cast<std::uint64_t>(args->seed);
    options.device = resolve_device_option("eval", args->device);
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
    // Labels are checked against the real data's classes inside the evaluation.
    // Unreadable or mismatched inputs and unknown real data are bad input (exit code 2).
    LabelledImages set;
    try {
      set = read_labelled_images(images, labels, 256);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("eval: ") + e.what());
    }
    nlohmann::json result;
    try {
      result = evaluate_image_set(set, options, log);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("eval: ") + e.what());
    }
    result["samples"] = images.string();
    result["labels"] = labels.string();
    const fs::path run = args->run.empty() ? run_of(images) : fs::path(args->run);
    if (!run.empty()) {
      write_file_atomically(run / "eval.json", result.dump(2) + "\n");
      std::ofstream(run / "metrics.jsonl", std::ios::app) << nlohmann::json{{"eval", result}}.dump() << "\n";
      log << "recorded in " << (run / "eval.json").string() << " and metrics.jsonl\n";
    }
    for (const auto& caveat : result["caveats"]) log << "caveat: " << caveat.get<std::string>() << "\n";
    if (args->json) std::cout << result.dump() << "\n";
    exit_code = exit_ok;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
