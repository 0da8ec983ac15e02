// Pre-flight: every check that needs no training, writing nothing (a refused run leaves no
// directory): data-use rules, evaluation references, batch sizes, parameter selections, init_from,
// the privacy plan (privacy_plan.cpp), and warnings a researcher can act on.
#include "run/run_session.hpp"

#include "data/disjointness.hpp"
#include "weights/safetensors_weights.hpp"
#include "sample/sample_set.hpp"
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

void RunOrchestrator::check_data_use(RunSession& s) const {
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
    const std::string stage = "stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "'";
    if (const auto extra = mechanisms[i]->public_data_name()) {
      check_public_use(s, recipe_.dataset(*extra).name, stage + ": public_data = '" + *extra + "'", PublicUse::read,
                       first_private);
    }
    if (mechanisms[i]->is_private()) continue;
    if (s.is_released(recipe_.stages[i].data)) continue;  // a DP release: its cost is in the ledger
    check_public_use(s, recipe_.stages[i].data,
                     stage + ": mechanism '" + recipe_.stages[i].mechanism.id + "' is not private", PublicUse::train,
                     first_private);
  }
}

void RunOrchestrator::check_public_use(const RunSession& s, const std::string& name, const std::string& use,
                                       PublicUse how, std::size_t first_private) const {
  // `use` (a non-private stage's data, or the public data a private mechanism reads) must be public
  // and share no record with the private data.
  const sdk::Dataset& data = *s.datasets.at(name);
  const DataSection& section = recipe_.dataset(name);
  if (!data.is_public()) {
    throw std::runtime_error(use + " and may only " + (how == PublicUse::train ? "train on" : "read") +
                             " data marked public ([" + section.path +
                             "] public = true, or a public dataset such as glyphs); " + data.name() + " is private");
  }
  if (first_private == components_.mechanisms.size()) return;
  const std::int64_t shared = shared_records(s.identities.at(section.name).records,
                                             s.identities.at(s.private_data).records);
  if (section.name == s.private_data || shared > 0) {
    throw std::runtime_error(use + ", but stage[" + std::to_string(first_private) + "] '" +
                             recipe_.stages[first_private].name + "' trains privately on " +
                             (section.name == s.private_data
                                  ? "the same data (" + data.name() + ")"
                                  : "data that shares " + std::to_string(shared) + " of its records (" + data.name() +
                                        " and " + s.stage_data(recipe_, first_private).name() + " hold the same images)") +
                             ": data a private stage protects cannot also be public; " +
                             (how == PublicUse::train ? "train the non-private stage on other data, or make it private"
                                                      : "read other public data"));
  }
}

namespace {

// The private record sets of the run's init_from ancestry: the source's (its data-records.bin) when the
// run starts; when it resumes, those the run recorded when it started (its own data-records.bin, less
// its own sets).
std::vector<RecordSet> ancestry_private_sets(const RunSession& s) {
  std::vector<RecordSet> sets;
  if (!s.init) return sets;
  if (s.init->records) {
    sets = *s.init->records;
  } else if (std::error_code ec; s.options.resume && fs::is_regular_file(s.run_dir / record_sets_file, ec)) {
    try {
      sets = record_sets_from_bytes(read_file(s.run_dir / record_sets_file));
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot resume " + s.run_dir.string() + ": " + (s.run_dir / record_sets_file).string() +
                               ": " + e.what());
    }
    const std::string mine = fs::absolute(s.run_dir).string();
    sets.erase(std::remove_if(sets.begin(), sets.end(), [&](const RecordSet& set) { return set.origin == mine; }),
               sets.end());
  }
  sets.erase(std::remove_if(sets.begin(), sets.end(), [](const RecordSet& set) { return !set.is_private; }), sets.end());
  return sets;
}

// Public data a built-in plugin renders from installed fonts rather than reads from image files: it cannot
// hold a near-copy of a private record, and the near-duplicate search of its 10^4-10^5 records against the
// private ones (~7 ms a record) would add minutes to every validate. Hashes still compare it.
bool made_here(const DataSection& section) { return section.dataset.id == "glyphs"; }

}  // namespace

const std::vector<ProtectedData>& RunOrchestrator::protected_data(RunSession& s) const {
  if (s.protected_data) return s.protected_data->data;
  OpenedProtectedData ancestry = open_protected_data(ancestry_private_sets(s), record_key(), open_run_data_);
  OpenedProtectedData& all = s.protected_data.emplace();
  if (!s.private_data.empty()) {
    const sdk::Dataset& mine = *s.datasets.at(s.private_data);
    all.data.push_back({"the data the run trains on privately (" + mine.name() + ")",
                        public_record_set(s.identities.at(s.private_data), ""), &mine, ""});
  }
  for (auto& entry : ancestry.data) all.data.push_back(std::move(entry));
  all.opened = std::move(ancestry.opened);
  return all.data;
}

void RunOrchestrator::check_public_near_copies(RunSession& s) const {
  // Exact copies were refused by check_data_use (this run's private data) and decide_init_from (the
  // ancestry's). A record shifted by a pixel, mirrored or re-exposed hashes differently, yet trained on
  // or read without noise it is as exposed as the original: the data-identity service looks for those
  // too, against every private set whose records it can compare (sets under another record key are
  // decide_init_from's to rule on, with init_from_disjoint).
  std::vector<std::pair<std::string, std::string>> uses;  // (what uses it, dataset name), each name once
  auto add = [&](const std::string& use, const std::string& name) {
    for (const auto& [_, seen] : uses) {
      if (seen == name) return;
    }
    uses.emplace_back(use, name);
  };
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const std::string stage = "stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "'";
    if (const auto extra = components_.mechanisms[i]->public_data_name()) {
      add(stage + ": public_data = '" + *extra + "'", recipe_.dataset(*extra).name);
    }
    if (!components_.mechanisms[i]->is_private() && !s.is_released(recipe_.stages[i].data)) {
      add(stage + " (mechanism '" + recipe_.stages[i].mechanism.id + "', not private)", recipe_.stages[i].data);
    }
  }
  if (uses.empty()) return;
  std::vector<ProtectedData> comparable;
  for (const auto& data : protected_data(s)) {
    if (!data.records.is_private || data.records.key_id == record_key().id) comparable.push_back(data);
  }
  if (comparable.empty()) return;
  for (const auto& [use, name] : uses) {
    const DataSection& section = recipe_.dataset(name);
    if (made_here(section)) {
      s.log << use << ": '" << name << "' is rendered here by " << section.dataset.id << " (no image file is read), "
            << "so it holds no private record: compared by hash only\n";
      continue;
    }
    const Disjointness found = check_disjointness(*s.datasets.at(name), comparable, record_key(), &s.log);
    if (found.disjoint()) continue;
    if (found.shared == 0 && section.near_duplicates == "caveat") {
      s.data_caveats.push_back("public data '" + name + "' (" + use + ") " + found.summary() + " ([" + section.path +
                               "] near_duplicates = \"caveat\": stated to be independent pictures); where they "
                               "are copies, they were used without noise and the guarantee does not cover them");
      s.log << "warning: " << use << ": the public data '" << name << "' " << found.summary()
            << "; used anyway, with a caveat (near_duplicates = \"caveat\")\n";
      continue;
    }
    throw std::runtime_error(use + " uses '" + name + "' as public data, but it " + found.finding() + ": data "
                             "beside the private records must share no one with them; use other public data" +
                             (found.shared == 0 ? ", or set [" + section.path + "] near_duplicates = \"caveat\" if "
                                                  "they are independent pictures (the run then carries a caveat; see "
                                                  "docs/privacy.md#data-identity)"
                                                : std::string()));
  }
}

void RunOrchestrator::check_parameter_selections(RunSession& s) {
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

RunData RunOrchestrator::run_data(const RunSession& s) const {
  // The private dataset, and the public ones by stage (releases are neither: already private).
  RunData data;
  if (!s.private_data.empty()) data.private_data = &s.identities.at(s.private_data);
  for (std::size_t i = 0; i < recipe_.stages.size(); ++i) {
    const std::string stage = "stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "'";
    if (const auto extra = components_.mechanisms[i]->public_data_name()) {
      data.public_data.push_back({stage + " (public_data)", &s.identities.at(*extra)});
    }
    if (components_.mechanisms[i]->is_private() || s.is_released(recipe_.stages[i].data)) continue;
    data.public_data.push_back({stage, &s.identities.at(recipe_.stages[i].data)});
  }
  return data;
}

void RunOrchestrator::prepare_init_from(RunSession& s) {
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
  if (!s.init) s.init = read_init_source(recipe_.run.get_string("init_from"));  // read once (preflight may have)
  const InitSource& src = *s.init;
  const InitDecision decision = decide_init_from(src, run_data(s), recipe_.run.get_bool("init_from_disjoint"),
                                                 record_key(), [&] { return check_disjoint_statement(s, src); });
  s.carry = decision.carry;
  // Rank 0 writes the ledger; a rank on another machine (another record key) may be unable to
  // compare what rank 0 could, so rank 0's decision is the run's.
  if (s.options.collective) s.carry = sdk::agree_with_rank0(*s.options.collective, s.carry);
  s.carry_reason = decision.reason;
  s.init_caveats = decision.caveats;
  if (fresh) {  // here, before anything is written: a model that does not fit is refused up front
    const std::string& mine_type = recipe_.model->id;
    const bool safetensors = src.checkpoint.extension() == ".safetensors";
    auto load = [&](torch::nn::Module& module) {
      if (safetensors) sdk::load_pretrained_weights(src.checkpoint, module);
      else load_initial_weights(src.checkpoint, module);
    };
    if (src.model_type.empty() || src.model_type == mine_type) {
      load(components_.model->module());
    } else if (torch::nn::Module* part = components_.model->part_initialised_by(src.model_type)) {
      load(*part);  // e.g. a latent model's autoencoder from an autoencoder run
      s.log << "init_from: the " << src.model_type << " run's weights fill its part of this " << mine_type
            << "; the rest keeps its initialisation\n";
    } else {
      throw std::runtime_error("run.init_from: " + src.run_dir.string() + " trained a " + src.model_type + " model; this "
                               "recipe's [model] is " + mine_type + ", which cannot start from one");
    }
    s.log << "init_from " << src.checkpoint.string() << ": " << s.carry_reason << "\n";
  }
}

std::string RunOrchestrator::check_disjoint_statement(RunSession& s, const InitSource& source) const {
  // [run] init_from_disjoint: the user states that no one in this run's private data is in the data
  // the source (or its ancestry) trained on. The recorded hashes cannot refute that for a near-copy of
  // a record, nor under another record key: the source's data are opened and compared with this run's
  // by the data-identity service (plain hashes, then near-duplicates).
  if (!open_run_data_) {
    return std::string("not checked for near-duplicates: the source's data could not be opened here; not looked "
                       "for: ") + near_duplicates_not_looked_for;
  }
  std::vector<fs::path> runs{source.run_dir};
  for (const auto& set : source.records ? *source.records : std::vector<RecordSet>{}) {
    if (set.is_private && std::find(runs.begin(), runs.end(), fs::path(set.origin)) == runs.end()) runs.push_back(set.origin);
  }
  std::vector<std::unique_ptr<sdk::Dataset>> opened;
  std::vector<ProtectedData> theirs;
  for (const auto& run : runs) {
    try {
      for (auto& data : open_run_data_(run)) {
        theirs.push_back({data->name() + " of run " + run.string(), public_record_set(dataset_identity(*data), run),
                          data.get(), ""});
        opened.push_back(std::move(data));
      }
    } catch (const std::exception& e) {
      theirs.push_back({"the data of run " + run.string(), RecordSet{}, nullptr, e.what()});
    }
  }
  const sdk::Dataset& mine = *s.datasets.at(s.private_data);
  const Disjointness found = check_disjointness(mine, theirs, RecordKey{}, &s.log);  // plain digests: no key
  if (!found.disjoint()) {
    throw std::runtime_error("run.init_from_disjoint: you state that this run's private data share no one with the "
                             "data " + source.run_dir.string() + " trained on, but " + mine.name() + " " +
                             found.finding() + ": remove the statement (the source's ledger is then carried), or the "
                             "duplicates from the data (see docs/privacy.md#data-identity)");
  }
  return "no shared record or near-duplicate found: " + found.checked();
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

void RunOrchestrator::check_eval_reference(RunSession& s) const {
  const DataSection* data = eval_data();
  for (std::size_t e = 0; e < recipe_.evals.size() && data; ++e) {
    const auto& config = data->dataset.config;
    if (!config.has("split")) {
      throw std::runtime_error("eval[" + std::to_string(e) + "]: [[eval]] scores samples against the real data's "
                               "held-out test split; the run's data '" + data->name + "' is " + data->dataset.id +
                               ", which has no `split` key (datasets with splits: idx, fashion-mnist, mnist, cifar10, "
                               "celeba); use privdiff eval --real ... instead");
    }
    if (recipe_.evals[e].settings.get_string("reference") == "held_out" && config.get_string("split") == "test") {
      throw std::runtime_error("eval[" + std::to_string(e) + "].reference: \"held_out\" scores against the test "
                               "split, but the run trains on it (" + data->path + ".split = \"test\"); set reference = "
                               "\"training\" to score against it anyway (the run then carries a caveat)");
    }
    if (recipe_.evals[e].settings.get_string("reference") == "held_out" && !s.private_data.empty()) {
      check_test_split_is_held_out(s, *data, e);
    }
  }
}

void RunOrchestrator::check_test_split_is_held_out(RunSession& s, const DataSection& data, std::size_t e) const {
  // By content, not by the split's name: a test split that holds records the run trains on privately,
  // or near-copies of them, would put noise-free statistics of them into eval.json. The data-identity
  // service decides, as it does for privdiff eval (evaluation_data_use.hpp) and sweeps' scores.
  std::unique_ptr<sdk::Dataset> opened;
  try {
    opened = open_dataset_(split_section(data, "test"));
  } catch (const std::exception& ex) {
    throw std::runtime_error("eval[" + std::to_string(e) + "]: the held-out test split of '" + data.name +
                             "' cannot be opened: " + ex.what());
  }
  // Against the run's private data and its ancestry's (a test split holding the records an init_from
  // source trained on is as private as one holding this run's).
  const Disjointness found = check_disjointness(*opened, protected_data(s), record_key(), &s.log);
  if (found.disjoint()) return;
  const std::string entry = "eval[" + std::to_string(e) + "]";
  const bool stated = recipe_.evals[e].settings.get_string("held_out_near_duplicates") == "caveat";
  if (found.shared == 0 && stated) {  // near-duplicates only, which the user states are other pictures
    s.data_caveats.push_back("eval-" + std::to_string(e) + ".json: the held-out test split of '" + data.name + "' " +
                             found.summary() + " ([[eval]] held_out_near_duplicates = \"caveat\": stated to be "
                             "independent pictures); where they are copies, its scores are statistics of private "
                             "records, not covered by the guarantee");
    s.log << "warning: " << entry << ": the held-out test split " << found.summary() << "; scored anyway, with a "
          << "caveat (held_out_near_duplicates = \"caveat\")\n";
    return;
  }
  throw std::runtime_error(entry + ".reference: \"held_out\" scores against the test split of '" + data.name +
                           "', but it " + found.finding() + "; its scores would be noise-free statistics of them: "
                           "score against data the run does not train on, or set reference = \"training\" (the run "
                           "then carries a caveat)" +
                           (found.shared == 0 ? ", or held_out_near_duplicates = \"caveat\" if they are independent "
                                                "pictures (see docs/privacy.md#data-identity)"
                                              : std::string()));
}

void RunOrchestrator::preflight(RunSession& s) {
  if (components_.model) {
    for (const auto& p : components_.model->module().parameters()) s.total_params += p.numel();
    s.log << "model " << recipe_.model->id << ": " << s.total_params << " parameters\n";
    if (recipe_.adapter) {
      std::int64_t adapter_params = 0;
      for (const auto& p : sdk::engine::parameters_with_roles(*components_.model)) {
        if (p.role == "adapter") adapter_params += p.parameter.numel();
      }
      s.log << "adapter " << recipe_.adapter->id << ": " << adapter_params << " of them\n";
    }
  }
  for (const auto& entry : recipe_.evals) {  // refused now, not by the allocator after training
    if (!components_.model) break;
    if (model_classes(recipe_.model->config) <= 0 && entry.settings.get_string("labels") != "prompts") {
      throw std::runtime_error(entry.settings.path() + ": [[eval]] scores labelled samples; the model has no classes "
                               "(num_classes = 0): a text-conditioned model labels them by prompt "
                               "(labels = \"prompts\")");
    }
    const std::string problem = sample_set_too_large(entry.settings.get_int("samples"), components_.model->image_shape(),
                                                     s.run_dir.empty() ? fs::path(".") : s.run_dir);
    if (!problem.empty()) throw sdk::KeyValueError(entry.settings.path() + ".samples", problem);
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
  if (recipe_.run.has("init_from") && !s.options.resume) {  // an infinite epsilon is said before the data are opened
    s.init = read_init_source(recipe_.run.get_string("init_from"));  // prepare_init_from takes it from here
    refuse_infinite_ledger(*s.init, !recipe_.run.get_bool("init_from_disjoint") || !any_private(components_));
  }
  open_datasets(s);
  check_data_use(s);
  check_public_data(s);
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {  // e.g. a batch larger than the data
    try {
      components_.mechanisms[i]->planned_events_with(1.0, s.stage_size(i));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("stage[" + std::to_string(i) + "] '" + recipe_.stages[i].name + "': " + e.what());
    }
  }
  check_parameter_selections(s);
  prepare_init_from(s);
  // After init_from: both compare with the ancestry's private data too.
  check_public_near_copies(s);
  check_eval_reference(s);
  check_eval_prompts(s);
  plan_privacy(s);
  // Each stage's noise multiplier as set (configured, or calibrated by plan_privacy): kept as the
  // mechanism holds it, never worked back out of its planned events.
  noise_multipliers_.clear();
  for (const auto& m : components_.mechanisms) {
    noise_multipliers_.push_back(m->is_private() ? m->noise_multiplier().value_or(std::nan("")) : std::nan(""));
  }
  warn_about_short_ema(s);
  warn_about_noise(s);
}

void RunOrchestrator::warn_about_short_ema(RunSession& s) const {
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

}  // namespace privdiff::core
