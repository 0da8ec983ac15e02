// privdiff sample RUN_DIR|CHECKPOINT|RECIPE.toml [--count N] [--labels balanced|uniform] [--sampler ID]
//                 [--set sampler.KEY=VALUE]... [--out PREFIX] [--batch-size N] [--seed S]
//                 [--prompt TEXT]... [--prompts FILE] [--allow-private-prompts]
// A recipe samples the safetensors weights its [run] init_from names with its [model] and [sampler]:
// a published model, as privdiff weights import prints its tables, sampled without training.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "cli/device_option.hpp"
#include "run/composed_run.hpp"
#include "util/cpu_threads.hpp"
#include "recipe/suggest.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_guarantee.hpp"
#include "run/run_ledger.hpp"
#include "run/run_ledger.hpp"
#include "sample/sample_prompts.hpp"
#include "sample/sample_set.hpp"
#include "util/content_hash.hpp"
#include "weights/model_export.hpp"
#include "weights/safetensors_weights.hpp"

#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>
#include <chrono>
#include <iostream>
#include <limits>
#if defined(__GLIBC__)
#include <malloc.h>
#include <optional>
#endif

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

// A sampler's step allocates and frees the same large activations (a 3x3 convolution's unfolded
// input at batch 250 is ~200 MB) hundreds of times. glibc serves each from a fresh mmap (above its
// 32 MB threshold) or trims the heap after it, so every step page-faults its memory in again: half
// of `sample`'s time was the kernel's (12 images/s against 27 with the heap kept; 2 cores, the
// quickstart's model). Keeping freed memory for reuse: peak memory 0.74-0.95 GB against 0.69.
void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

// Where the model's weights and its recipe come from: a run (its checkpoint and recipe.toml), or a
// recipe whose [run] init_from names safetensors weights.
struct SampleSource {
  fs::path checkpoint, run_dir, recipe_file;
  bool from_recipe = false;
};

SampleSource sample_source(const std::string& source) {
  if (fs::path(source).extension() != ".toml") {
    const auto [checkpoint, run_dir, recipe_file] = run_files(source, "sample");
    return {checkpoint, run_dir, recipe_file, false};
  }
  if (!fs::is_regular_file(source)) throw UsageError("sample: " + source + " does not exist");
  return {{}, {}, source, true};
}

// A recipe's init_from weights into the model; what their privacy is, on stderr.
fs::path load_recipe_weights(const Recipe& recipe, const fs::path& recipe_file, sdk::Model& model) {
  if (!recipe.run.has("init_from")) {
    throw UsageError("sample: " + recipe_file.string() + " has no [run] init_from naming the weights to sample");
  }
  const fs::path from = recipe.run.get_string("init_from");
  const auto file = safetensors_init_file(from);
  if (!file) {
    throw UsageError("sample: run.init_from = " + from.string() + " is not safetensors weights (a run directory is "
                     "sampled directly: privdiff sample " + from.string() + ")");
  }
  try {
    sdk::load_pretrained_weights(*file, model.module());
    // What the weights cost, from their metadata: a privdiff export (or sweep release) says it.
    if (sdk::SafetensorsFile(*file).metadata().count(export_keys::privacy)) {
      std::cerr << "note: a privdiff export: its guarantee is in its metadata (privdiff weights inspect " << file->string() << ")\n";
    } else {
      std::cerr << "note: weights from outside privdiff (" << file->string() << ", content hash " << content_hash(sdk::read_file(*file))
                << "): privdiff has no record of what they were trained on or of the privacy they cost; their guarantee "
                   "is what their publisher states\n";
    }
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("sample: ") + e.what());
  }
  return *file;
}

// A run's checkpoint into the model: the run's own (trained under its recipe.toml: the run's guarantee covers
// no other run's weights), and of this model. Refusals are bad input (exit 2).
void load_run_weights(const fs::path& checkpoint, const fs::path& recipe_file, sdk::Model& model) {
  try {
    check_checkpoint_of_run(checkpoint, recipe_file);
    load_model_weights(checkpoint, model);
  } catch (const std::runtime_error& e) {  // damaged, of another model, or of another run
    throw UsageError(std::string("sample: ") + e.what());
  }
}

// The prompts, checked against the run's private captions before anything is loaded or drawn; with
// --allow-private-prompts a match becomes the caveat the run's reports get when sampling starts.
struct PromptPlan {
  std::vector<std::string> texts;
  std::string caveat;
};

PromptPlan plan_prompts(const std::vector<std::string>& inline_prompts, const std::string& file, bool allow,
                        const SampleSource& source) {
  std::vector<Prompt> prompts;
  try {
    prompts = sample_prompts(inline_prompts, file);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("sample: ") + e.what());
  }
  PromptPlan plan;
  for (const Prompt& p : prompts) plan.texts.push_back(p.text);
  if (prompts.empty()) return plan;
  if (source.from_recipe) return plan;  // (checked once the weights are known: unchecked_export_prompts)
  std::vector<PromptMatch> matches;
  try {
    matches = private_prompts_of_run(prompts, source.run_dir);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("sample: ") + e.what());
  }
  if (!matches.empty() && !allow) throw UsageError("sample: " + prompt_refusal(matches));
  if (!matches.empty()) plan.caveat = private_prompt_caveat(matches);
  return plan;
}

// The privacy this model cost is the run's ledger; say so when the run directory's two records of it
// disagree (privdiff account RUN reports the longer one), and name its caveats.
void print_run_ledger_notes(const fs::path& run_dir) {
  if (!fs::is_regular_file(run_dir / "ledger.json")) return;
  try {
    const RunLedger spent = read_run_ledger(run_dir);
    if (!spent.note.empty()) std::cerr << "note: " << spent.note << "\n";
    for (const auto& caveat : spent.ledger.caveats()) std::cerr << "caveat: " << caveat << "\n";
  } catch (const std::runtime_error& e) {
    std::cerr << "warning: " << e.what() << "\n";
  }
}

void print_written(const fs::path& images, const fs::path& prefix, const SampleSet& set, double seconds) {
  std::cout << "wrote " << images.string();
  if (set.labels.defined()) std::cout << ", " << labels_file_beside(images).string();
  if (!set.prompts.empty()) std::cout << ", " << prefix.string() << "-prompts.txt";
  std::cout << ", " << prefix.string() << "-grid.png (" << std::setprecision(3) << seconds << " s, "
            << static_cast<double>(set.images.size(0)) / seconds << " images/s)\n";
  if (!set.labels.defined() && set.prompts.empty()) {
    std::cout << "note: the model is unconditional, so there are no labels to evaluate\n";
  }
}

// Prompts for weights sampled through a recipe: a privdiff export keeps its guarantee but no digest of the
// captions it trained on, so its prompts cannot be checked and are refused without --allow-private-prompts;
// other weights have no record of their training data at all, which the user is told.
void unchecked_export_prompts(const fs::path& weights, const PromptPlan& prompts, bool allow) {
  if (prompts.texts.empty()) return;
  if (!sdk::SafetensorsFile(weights).metadata().count(export_keys::privacy)) {
    std::cerr << "note: the prompts are not checked against training captions: privdiff has no record of what "
              << weights.string() << " was trained on\n";
  } else if (!allow) {
    throw UsageError("sample: " + weights.string() + " is a privdiff export, which keeps no record of the captions it "
                     "was trained on: the prompts cannot be checked against them; sample its run directory instead, "
                     "or --allow-private-prompts to sample anyway");
  }
}

// What `privdiff sample` is asked.
struct SampleArgs {
  std::string source;
  std::int64_t count = 1000;
  std::string labels = "balanced";
  std::string sampler;
  std::vector<std::string> overrides;
  std::string out;
  std::int64_t batch_size = 250;
  std::int64_t seed = 0;
  std::int64_t threads = 0;
  std::string device;  // empty: the run's [run] device
  std::vector<std::string> prompts;
  std::string prompts_file;
  bool allow_private_prompts = false;
};

}  // namespace

CLI::App* add_sample_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "sample", "Sample labelled images from a trained run, written as an IDX image/label pair and a PNG grid");
  auto args = std::make_shared<SampleArgs>();
  cmd->add_option("RUN", args->source,
                  "run directory (uses its checkpoint.pt), a checkpoint file, or a recipe whose [run] init_from names "
                  "safetensors weights (a published model: privdiff weights import prints its tables)")->required();
  cmd->add_option("--count,-n", args->count, "number of images (default 1000)")->check(at_least(1));
  cmd->add_option("--labels", args->labels, "balanced: equal counts per class; uniform: random labels")
      ->check(CLI::IsMember({"balanced", "uniform"}));
  cmd->add_option("--sampler", args->sampler, "sampler id (default: the run's [sampler]); its keys via --set");
  cmd->add_option("--set", args->overrides, "sampler option, e.g. --set sampler.steps=50 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--out", args->out,
                  "output prefix (default RUN/samples/<sampler>-<count>): writes PREFIX-images-idx3-ubyte.gz, "
                  "PREFIX-labels-idx1-ubyte.gz, PREFIX-grid.png");
  cmd->add_option("--batch-size", args->batch_size, "images per sampler call (memory bound)")
      ->check(at_least(1));
  cmd->add_option("--seed", args->seed, "seed of the sampler's noise and of uniform labels")->check(at_least(0));
  cmd->add_option("--threads", args->threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--device", args->device, "auto, cpu, cuda or cuda:N (default: the run's [run] device)");
  cmd->add_option("--prompt", args->prompts, "a prompt for a text-conditioned model (repeatable); samples are spread "
                  "over the prompts in blocks, as over balanced labels");
  cmd->add_option("--prompts", args->prompts_file, "a file of prompts, one per line");
  cmd->add_flag("--allow-private-prompts", args->allow_private_prompts,
                "sample even with prompts that are the run's private captions (the run's reports then carry a caveat)");
  cmd->callback([&global, &exit_code, args] {
    const SampleSource source = sample_source(args->source);
    const PromptPlan prompts = plan_prompts(args->prompts, args->prompts_file, args->allow_private_prompts, source);
    const fs::path& recipe_file = source.recipe_file;
    fs::path checkpoint = source.checkpoint;
    for (const auto& o : args->overrides) {
      if (o.rfind("sampler.", 0) != 0) throw UsageError("sample --set " + o + ": only sampler.KEY=VALUE applies here");
    }
    RecipeDocument document = RecipeDocument::load(recipe_file);
    std::vector<std::string> overrides = args->overrides;
    ComponentRegistry registry;
    if (!args->sampler.empty()) {
      load_plugins(registry, global, &document);
      if (!registry.find(sdk::ComponentKind::sampler, args->sampler)) {
        const auto available = registry.ids(sdk::ComponentKind::sampler);
        throw UsageError("sample --sampler " + args->sampler + ": unknown sampler '" + args->sampler + "'" +
                         did_you_mean(args->sampler, available) + "; available samplers: " + join(available));
      }
      document.remove_section("sampler");  // the run's sampler keys belong to its sampler
      overrides.insert(overrides.begin(), "sampler.type=" + args->sampler);
    }
    const Recipe recipe = load_recipe(std::move(document), overrides, global, registry);
    if (!recipe.model) throw UsageError("sample: " + recipe_file.string() + " has no [model]");
    if (!recipe.sampler) {
      throw UsageError("sample: " + recipe_file.string() + " has no [sampler]; choose one with --sampler ID");
    }
    const c10::Device device =
        resolve_device_option("sample", args->device.empty() ? recipe.run.get_string("device") : args->device);
    use_cpu_threads(args->threads);
    keep_freed_memory_for_reuse();
    at::manual_seed(static_cast<std::uint64_t>(args->seed));
    auto model = create_model(recipe, registry);
    auto sampler = create_component<sdk::Sampler>(registry, recipe.sampler->id, recipe.sampler->config);
    if (source.from_recipe) {
      checkpoint = load_recipe_weights(recipe, recipe_file, *model);
      unchecked_export_prompts(checkpoint, prompts, args->allow_private_prompts);
    } else {
      load_run_weights(checkpoint, recipe_file, *model);
    }
    if (!prompts.texts.empty() && !model->conditions_on_text()) {
      throw UsageError("sample --prompt/--prompts: the model (" + recipe.model->id + ") does not condition on text; "
                       "prompts need a text-conditioned model (docs/captions.md)");
    }
    model->module().to(device);
    const fs::path& run_dir = source.run_dir;
    if (!source.from_recipe) print_run_ledger_notes(run_dir);
    SampleOptions options;
    options.count = args->count;
    options.num_classes = model_classes(recipe.model->config);
    options.balanced = args->labels == "balanced";
    options.batch_size = args->batch_size;
    options.seed = static_cast<std::uint64_t>(args->seed);
    // A text model without prompts samples from the empty caption: its unconditional branch.
    options.prompts = prompts.texts.empty() && model->conditions_on_text() ? std::vector<std::string>{""} : prompts.texts;
    const fs::path samples = source.from_recipe ? fs::path("samples") / recipe_file.stem() : run_dir / "samples";
    const fs::path prefix = args->out.empty() ? samples / (recipe.sampler->id + "-" + std::to_string(args->count))
                                              : fs::path(args->out);
    // Before anything is allocated: a count that cannot fit is refused with numbers, not by the allocator.
    const std::string too_large = sample_set_too_large(
        args->count, model->image_shape(), prefix.parent_path().empty() ? fs::path(".") : prefix.parent_path());
    if (!too_large.empty()) throw UsageError("sample --count " + std::to_string(args->count) + ": " + too_large);
    std::cout << "sampling " << args->count << " images from " << checkpoint.string() << " with "
              << recipe.sampler->id << " ("
              << (!prompts.texts.empty()   ? std::to_string(prompts.texts.size()) + " prompts"
                  : options.num_classes > 0 ? args->labels + " labels"
                                            : "unconditional")
              << ") on " << device.str() << "\n";
    if (!prompts.caveat.empty()) {  // before the first image: an interrupted sampling keeps it too
      add_run_caveat(run_dir, prompts.caveat);
      std::cerr << "caveat: " << prompts.caveat << "\n";
    }
    const auto start = std::chrono::steady_clock::now();
    const SampleSet set = generate_samples(*model, *sampler, options, std::cout);
    // A run's samples carry its identity, so that `privdiff eval` of a copy applies the run's checks.
    std::optional<SampleStamp> stamp;
    if (!source.from_recipe) stamp = stamp_of_run(run_dir);
    const fs::path images =
        write_sample_set(prefix, set, options.balanced, options.num_classes, stamp ? &*stamp : nullptr);
    print_written(images, prefix, set, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    exit_code = exit_ok;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
