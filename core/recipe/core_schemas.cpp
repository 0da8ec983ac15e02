#include "recipe/core_schemas.hpp"

namespace privdiff::core {

using sdk::Key;
using sdk::Schema;

const Schema& run_schema() {
  static const Schema schema = Schema{}
      .add(Key::string("name").optional()
               .doc("run name (runs/NAME: 1 to 64 letters, digits, _, . or -, no ..); default: the recipe file's "
                    "name without .toml"))
      .add(Key::integer("seed").at_least(0).defaults(0)
               .doc("seed of model initialisation, the loss's draws and sampling; the privacy noise and batches "
                    "follow it only where a stage sets secure_noise = false"))
      .add(Key::string("device").one_of({"auto", "cpu", "cuda"}).defaults("auto")
               .doc("where to train and sample; auto = CUDA when available"))
      .add(Key::integer("threads").at_least(0).at_most(1024).defaults(0)
               .doc("CPU threads (per process); 0 = the cores other processes leave idle, re-measured every 5 s "
                    "($OMP_NUM_THREADS when set), shared out among a machine's processes"))
      .add(Key::string("backend").one_of({"auto", "gloo", "nccl"}).defaults("auto")
               .doc("collectives of a multi-process run (privdiff run --nproc, torchrun): gloo (CPU), nccl (CUDA); "
                    "auto = nccl on CUDA where built in, else gloo"))
      .add(Key::integer("collective_timeout").at_least(1).defaults(600)
               .doc("seconds a rank waits for the others in a multi-process run before the run ends with an "
                    "error (a rank died or hangs)"))
      .add(Key::string("init_from").optional()
               .doc("start from this run directory's (or checkpoint.pt's) trained model, or from safetensors weights "
                    "(a .safetensors file, or a folder privdiff weights export wrote; docs/weights.md); relative to "
                    "the working directory. When the source spent privacy its ledger is carried and composed with "
                    "this run's (docs/privacy.md#init_from-carrying-the-sources-ledger)"))
      .add(Key::boolean("init_from_disjoint").defaults(false)
               .doc("state that no one in this run's private data is in the data the init_from source spent "
                    "privacy on: its ledger is then not carried and the run carries a caveat. Refused when a "
                    "shared or near-duplicate record is found, and without init_from"))
      .add(Key::integer("checkpoint_every").at_least(0).defaults(500)
               .doc("write checkpoint.pt every N logical steps (and always at the end of each stage); 0 = only then"))
      .add(Key::boolean("private_diagnostics").defaults(false)
               .doc("also log each private step's loss and realised batch size in metrics.jsonl and its TensorBoard "
                    "events (computed without noise: the run then carries a caveat, do not publish either)"));
  return schema;
}

const Schema& privacy_schema() {
  static const Schema schema = Schema{}
      .add(Key::number("epsilon").greater_than(0).optional()
               .doc("privacy target epsilon over the whole run (all stages)"))
      .add(Key::number("delta").greater_than(0).less_than(1).optional()
               .doc("privacy target delta; use well below 1/N for N private examples (docs/accountants.md#choosing-delta)"))
      .add(Key::string("accountant").defaults("rdp")
               .doc("accountant that checks the target and calibrates noise_multiplier = \"auto\""))
      .add(Key::boolean("allow_approximate_accountant").defaults(false)
               .doc("let an accountant that does not certify an upper bound on epsilon (an approximation) "
                    "calibrate the noise and state the guarantee; every report then carries a caveat"))
      .add(Key::string_list("report").defaults(sdk::ConfigValue{std::vector<std::string>{}})
               .doc("further accountants whose epsilon is reported at the end of the run"));
  return schema;
}

const Schema& plugins_schema() {
  static const Schema schema = Schema{}
      .add(Key::string_list("search").defaults(sdk::ConfigValue{std::vector<std::string>{}})
               .doc("extra plugin directories, relative to the recipe file"))
      .add(Key::string_list("use").defaults(sdk::ConfigValue{std::vector<std::string>{}})
               .doc("plugin libraries (.so files, relative to the recipe file) loaded and used for every component id "
                    "they register, where another library registers the same id; without it such an id is refused "
                    "as ambiguous (docs/writing-a-plugin.md#two-libraries-with-one-id)"));
  return schema;
}

const std::vector<std::string>& default_evaluators() {
  static const std::vector<std::string> ids{"dpdm_classifiers", "feature_cnn"};
  return ids;
}

const Schema& eval_schema() {
  static const Schema schema = Schema{}
      .add(Key::integer("samples").at_least(20).defaults(10000).doc("images to sample from the trained model"))
      .add(Key::string("labels").one_of({"balanced", "uniform", "prompts"}).defaults("balanced")
               .doc("class labels of the samples; prompts = each sample labelled with its prompt's index (prompt k "
                    "names class k of the eval data), so that the classifier evaluators score text alignment"))
      .add(Key::string_list("prompts").defaults(sdk::ConfigValue{std::vector<std::string>{}})
               .doc("a text-conditioned model: the prompts the samples are drawn from, in equal blocks in order "
                    "(none: the empty caption); checked against the private captions before the run trains "
                    "(docs/captions.md#prompts-in-eval)"))
      .add(Key::string("prompt_file").optional()
               .doc("a prompts file (one a line, relative to the working directory), read after prompts"))
      .add(Key::boolean("allow_private_prompts").defaults(false)
               .doc("sample with prompts that are (or cannot be shown not to be) private captions, with a caveat "
                    "on the run's guarantee and on this eval"))
      .add(Key::string_list("evaluators").defaults(sdk::ConfigValue{default_evaluators()})
               .doc("evaluator plugins that score the samples (privdiff plugins list); options in [eval.ID]"))
      .add(Key::integer("epochs").at_least(1).optional()
               .doc("epochs of every evaluator that trains classifiers, unless its [eval.ID] table sets them"))
      .add(Key::integer("batch_size").at_least(1).defaults(250).doc("images per sampler call"))
      .add(Key::integer("seed").at_least(0).defaults(0).doc("seed of the sampler noise and the classifiers"))
      .add(Key::string("reference").one_of({"held_out", "training"}).defaults("held_out")
               .doc("real data the scores are fitted to: held_out = the test split (disjoint from training); "
                    "training = the training split, whose non-private statistics then put a caveat on the run"))
      .add(Key::string("held_out_near_duplicates").one_of({"refuse", "caveat"}).defaults("refuse")
               .doc("a held-out test split holding near-duplicates of records the run trains on privately (a "
                    "copy changed by a grey level, shifted, rotated, cropped, resized or noisy): refused, or "
                    "scored with a caveat on the run (your statement that they are independent pictures, as "
                    "Fashion-MNIST's test split holds some of its training images'); see "
                    "docs/privacy.md#data-identity"));
  return schema;
}

const Schema& sweep_schema() {
  static const Schema schema = Schema{}
      .add(Key::string("score").optional()
               .doc("the [[eval]] metric that selects the best candidate, EVALUATOR.METRIC (e.g. "
                    "dpdm_classifiers.accuracy.cnn); --score overrides it. The searched keys are in [sweep.params]: "
                    "\"stage.2.lr\" = [1e-3, 2e-3] (a value drawn from the list) or \"stage.2.steps\" = "
                    "\"log:80:320:int\" (log-uniform); docs/sweep.md"))
      .add(Key::boolean("minimize").defaults(false).doc("the lowest score is the best (a distance such as FID)"))
      .add(Key::string("candidates").one_of({"truncated_negative_binomial", "poisson", "fixed"})
               .defaults("truncated_negative_binomial")
               .doc("the distribution of the number of candidates K (fixed: composition of all K, with a warning)"))
      .add(Key::number("eta").greater_than(-1).defaults(1.0)
               .doc("truncated negative binomial: eta (1: geometric)"))
      .add(Key::number("gamma").greater_than(0).less_than(1).defaults(0.25)
               .doc("truncated negative binomial: gamma (0.25: E[K] = 4 at eta 1)"))
      .add(Key::number("mu").greater_than(0).defaults(4.0).doc("poisson: the mean number of candidates"))
      .add(Key::integer("count").at_least(1).defaults(4).doc("fixed: the number of candidates"));
  return schema;
}

const std::vector<SectionShape>& recipe_sections() {
  static const std::vector<SectionShape> sections = {
      {"run", false},   {"privacy", false}, {"data", false},    {"plugins", false},
      {"model", false}, {"adapter", false}, {"stage", true},    {"sampler", false}, {"accountants", false}, {"eval", true},
      {"sweep", false},
  };
  return sections;
}

}  // namespace privdiff::core
