#include "run/init_from.hpp"

#include "recipe/recipe_text_guard.hpp"
#include "util/atomic_file.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_ledger.hpp"
#include "weights/model_export.hpp"
#include "weights/safetensors_weights.hpp"

#include <privdiff/io/json_error.hpp>
#include <privdiff/io/safetensors.hpp>

#include <privdiff/privacy/event_json.hpp>

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {
// The [model] type of the recipe a run directory records (what ran, with defaults written out).
std::string recorded_model_type(const fs::path& recipe_file) {
  std::error_code ec;
  if (!fs::is_regular_file(recipe_file, ec)) return {};  // a bare checkpoint: taken to be of this recipe's model
  const std::string text = read_file(recipe_file);
  if (const auto unsafe = unsafe_toml_text(text, recipe_file.string())) {
    throw std::runtime_error("run.init_from: " + recipe_file.string() + " is damaged: " + unsafe->message);
  }
  try {
    const toml::table recipe = toml::parse(text, recipe_file.string());
    return recipe["model"]["type"].value_or(std::string{});
  } catch (const toml::parse_error& e) {
    throw std::runtime_error("run.init_from: " + recipe_file.string() + " is damaged: " + std::string(e.description()));
  }
}
// Safetensors weights: a privdiff export carries its ledger in its metadata; other weights have none.
InitSource read_safetensors_source(const fs::path& file) {
  InitSource source;
  source.checkpoint = fs::absolute(file);
  source.run_dir = source.checkpoint.parent_path();
  source.finished = true;
  std::map<std::string, std::string> metadata;
  try {
    metadata = sdk::SafetensorsFile(source.checkpoint).metadata();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("run.init_from: ") + e.what());
  }
  source.checkpoint_hash = content_hash(read_file(source.checkpoint));
  const std::string what = source.checkpoint.string() + ", content hash " + source.checkpoint_hash;
  const auto privacy = metadata.find(export_keys::privacy);
  if (privacy == metadata.end()) {
    source.records_note = "weights from outside privdiff (" + source.checkpoint.string() + "): what they were trained on "
                          "is not recorded";
    source.imported = "init_from: weights from outside privdiff (" + what + ") have no privacy ledger: they are "
                      "public pretraining by the user's statement, and that their training data share no one with this "
                      "run's private data is the user's responsibility; they do not change epsilon";
    return source;
  }
  auto damaged = [&](const std::string& why) {
    return std::runtime_error("run.init_from: " + source.checkpoint.string() + ": its " + export_keys::privacy +
                              " metadata is damaged (" + why + "): the privacy its weights cost cannot be read");
  };
  nlohmann::json p;
  try {
    p = nlohmann::json::parse(privacy->second);
    p.at("private").get<bool>();
  } catch (const std::exception& e) {
    throw damaged(privdiff::sdk::json_error_text(e));
  }
  if (p["private"].get<bool>() && !p.contains("ledger") && p.contains("theorem")) {
    throw std::runtime_error("run.init_from: " + source.checkpoint.string() + " was released by privdiff sweep: its cost (" +
                             p.value("mechanism", std::string("a private selection")) + ") is not a ledger init_from "
                             "can carry into this run's accounting (a private model without its ledger), so a run "
                             "cannot start from it");
  }
  try {
    if (p["private"].get<bool>() && !p.contains("ledger")) throw std::runtime_error("a private model without its ledger");
    if (p.contains("ledger")) source.ledger = sdk::privacy_ledger_from_json(p["ledger"].dump());
  } catch (const std::exception& e) {
    throw damaged(privdiff::sdk::json_error_text(e));
  }
  if (const auto model = metadata.find(export_keys::model); model != metadata.end()) source.model_type = model->second;
  if (p.contains("data") && p["data"].is_string()) source.data_fingerprint = p["data"].get<std::string>();
  source.records_note = "a privdiff export (" + source.checkpoint.string() + ") keeps no record of the data it trained on";
  source.imported = "init_from: a privdiff export (" + what + "): the privacy ledger in its metadata is taken as what "
                    "its weights cost";
  return source;
}

}  // namespace

InitSource read_init_source(const fs::path& path) {
  if (const auto file = safetensors_init_file(path)) return read_safetensors_source(*file);
  InitSource source;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    source.run_dir = path;
    source.checkpoint = path / "checkpoint.pt";
  } else if (fs::is_regular_file(path, ec)) {
    source.checkpoint = path;
    source.run_dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  } else {
    throw std::runtime_error("run.init_from: " + path.string() + " is neither a run directory, a checkpoint nor "
                             "safetensors weights");
  }
  if (!fs::is_regular_file(source.checkpoint, ec)) {
    throw std::runtime_error("run.init_from: " + source.run_dir.string() + " has no checkpoint.pt (is it a run "
                             "directory written by privdiff run?)");
  }
  source.checkpoint = fs::absolute(source.checkpoint);
  source.run_dir = fs::absolute(source.run_dir);
  source.checkpoint_hash = content_hash(read_file(source.checkpoint));
  source.model_type = recorded_model_type(source.run_dir / "recipe.toml");
  // What it spent: the longer of its ledger.json and its checkpoint's ledger, as for resume.
  source.ledger = read_run_ledger(source.run_dir).ledger;
  source.finished = fs::is_regular_file(source.run_dir / "summary.json", ec);
  const fs::path records = source.run_dir / record_sets_file;
  if (!fs::is_regular_file(records, ec)) {
    source.records_note = source.run_dir.string() + " keeps no " + record_sets_file + " (made by privdiff < 0.8?)";
  } else {
    try {
      source.records = record_sets_from_bytes(read_file(records));
    } catch (const std::exception& e) {
      source.records_note = records.string() + ": " + e.what();
    }
  }
  return source;
}

namespace {

// The first event of `e` that spends infinite epsilon (a Gaussian of noise multiplier 0 that is applied), or null.
const sdk::PrivacyEvent* noiseless_gaussian(const sdk::PrivacyEvent& e) {
  switch (e.kind()) {
    case sdk::PrivacyEvent::Kind::gaussian:
      return e.noise_multiplier() == 0 ? &e : nullptr;
    case sdk::PrivacyEvent::Kind::poisson_sampled:
      return e.sampling_rate() > 0 ? noiseless_gaussian(e.inner()) : nullptr;
    case sdk::PrivacyEvent::Kind::self_composed:
      return e.count() > 0 ? noiseless_gaussian(e.inner()) : nullptr;
    case sdk::PrivacyEvent::Kind::composed:
      for (const auto& child : e.children()) {
        if (const auto* found = noiseless_gaussian(child)) return found;
      }
      return nullptr;
    default:
      return nullptr;
  }
}

}  // namespace

void refuse_infinite_ledger(const InitSource& source, bool would_carry) {
  if (!would_carry) return;
  const auto& entries = source.ledger.entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!noiseless_gaussian(entries[i])) continue;
    throw std::runtime_error("run.init_from: the ledger carried from " + source.checkpoint.string() + " has a Gaussian "
                             "event with noise multiplier 0 (its entry " + std::to_string(i + 1) + ", " +
                             entries[i].to_string() + "): epsilon is infinite, so no run that carries it has a "
                             "guarantee; start from other weights, or, if this run's private data share no one with "
                             "the data they were trained on, state it ([run] init_from_disjoint = true) and the ledger "
                             "is not carried");
  }
}

InitSource read_recorded_init(const fs::path& file) {
  InitSource source;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(file));
    source.run_dir = j.at("source").get<std::string>();
    source.checkpoint = j.at("checkpoint").get<std::string>();
    source.checkpoint_hash = j.at("checkpoint_hash").get<std::string>();
    source.finished = j.at("source_finished").get<bool>();
    source.carried = j.at("carried").get<bool>();
    source.reason = j.at("reason").get<std::string>();
    source.ledger = sdk::privacy_ledger_from_json(j.at("carried_ledger").dump());
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": unreadable (" + e.what() + ")");
  }
  return source;
}

nlohmann::json data_use_json(const std::vector<RecordSet>& sets) {
  nlohmann::json use = {{"private", nlohmann::json::array()}, {"public", nlohmann::json::array()}};
  for (const auto& set : sets) {
    use[set.is_private ? "private" : "public"].push_back(set.description + " (run " + set.origin + ")");
  }
  use["records"] = record_sets_file;
  return use;
}

namespace {

std::string count_text(std::int64_t n) { return std::to_string(n) + (n == 1 ? " record" : " records"); }

constexpr const char* opt_in = "[run] init_from_disjoint = true; see docs/privacy.md#init_from-carrying-the-sources-ledger";

// The statement's caveat: what the user stated, which privdiff cannot show.
std::string disjoint_caveat(const InitSource& source, const std::string& what) {
  return "init_from_disjoint: the user states that " + what + " (" + source.run_dir.string() +
         "); privdiff cannot show it, and the guarantee holds only if it is true";
}

// Public data of this run against the source's private sets: a shared record would be trained on
// without noise.
void check_public_data(const InitSource& source, const RunData& data, bool claimed, const RecordKey& key,
                       InitDecision& decision) {
  const bool spent = !source.ledger.entries().empty();
  for (const auto& pub : data.public_data) {
    const std::string refused = pub.stage + " trains non-privately on " + pub.data->name + ", ";
    if (!source.records) {
      if (!spent) continue;  // no private training anywhere in its ancestry (it would have carried)
      if (!claimed) {
        throw std::runtime_error(refused + "but the initial model's run (" + source.run_dir.string() + ") spent "
                                 "privacy on data that cannot be compared with it (" + source.records_note +
                                 "): it cannot be public here unless you know they are disjoint (" + opt_in + ")");
      }
      decision.caveats.push_back(disjoint_caveat(source, pub.data->name + " shares no record with the data the "
                                                          "initial model's run trained on privately"));
      continue;
    }
    for (const auto& set : *source.records) {
      if (!set.is_private) continue;
      const Overlap shared = overlap(*pub.data, set, key);
      if (shared.known && shared.records > 0) {
        throw std::runtime_error(refused + "which shares " + count_text(shared.records) + " with data the initial "
                                 "model's run or its ancestry trained on privately (" + set.description + ", run " +
                                 set.origin + "): it cannot be public here (see docs/privacy.md#data-identity)");
      }
      if (!shared.known && !claimed) {
        throw std::runtime_error(refused + "which cannot be compared with the data run " + set.origin + " trained on "
                                 "privately (" + set.description + "; recorded under another record key, " +
                                 key.file.string() + "): it cannot be public here unless you know they are disjoint (" +
                                 opt_in + ")");
      }
      if (!shared.known) {
        decision.caveats.push_back(disjoint_caveat(source, pub.data->name + " shares no record with " + set.description));
      }
    }
  }
}

// This run's private data against the source's public sets: a shared record was trained on
// without noise upstream, and no guarantee covers it.
void check_private_data(const InitSource& source, const RunData& data, bool claimed, InitDecision& decision) {
  if (!data.private_data) return;
  if (!source.records) {
    if (!claimed) {
      throw std::runtime_error("run.init_from: what the initial model's run (" + source.run_dir.string() + ") trained "
                               "on cannot be compared with this run's private data (" + source.records_note + "): if "
                               "it trained non-privately on any of these records no guarantee covers them; start from a "
                               "run made by this privdiff, or state that they are disjoint (" + opt_in + ")");
    }
    decision.caveats.push_back(disjoint_caveat(source, "this run's private data (" + data.private_data->name +
                                                           ") were not among the data it trained on non-privately"));
    return;
  }
  for (const auto& set : *source.records) {
    if (set.is_private) continue;
    const std::int64_t shared = shared_records(data.private_data->records, set.hashes);
    if (shared > 0) {
      throw std::runtime_error("run.init_from: the initial model's run or its ancestry (run " + set.origin + ") "
                               "trained non-privately on " + count_text(shared) + " of this run's private data (" +
                               data.private_data->name + " shares them with " + set.description +
                               "): no guarantee can cover them (see docs/privacy.md#data-identity)");
    }
  }
}

}  // namespace

InitDecision decide_init_from(const InitSource& source, const RunData& data, bool claimed, const RecordKey& key,
                              const std::function<std::string()>& check_near_duplicates) {
  InitDecision d;
  if (!source.imported.empty()) d.caveats.push_back(source.imported);
  check_public_data(source, data, claimed, key, d);
  check_private_data(source, data, claimed, d);
  if (source.ledger.entries().empty()) {
    d.reason = "the source spent no privacy: nothing carried";
    return d;
  }
  if (!data.private_data) {
    d.carry = true;
    d.reason = "this run trains on no private data; its model descends from the source's private training: the "
               "source's ledger is carried";
    return d;
  }
  // Carried unless the user states that the data share no one: exact hashes can show that records are
  // the same, never that they are different people (one changed pixel, a mirror image).
  std::string unknown = source.records ? "" : source.records_note;
  for (const auto& set : source.records ? *source.records : std::vector<RecordSet>{}) {
    if (!set.is_private) continue;
    const Overlap shared = overlap(*data.private_data, set, key);
    if (shared.known && shared.records > 0) {
      if (claimed) {
        throw std::runtime_error("run.init_from_disjoint: you state that this run's private data and the source's are "
                                 "disjoint, but " + count_text(shared.records) + " of " + data.private_data->name +
                                 " are among the data run " + set.origin + " trained on privately (" +
                                 set.description + "; see docs/privacy.md#init_from-carrying-the-sources-ledger)");
      }
      d.carry = true;
      // (No count here: the reason is written to the run directory, and the count depends on private data.)
      d.reason = "the source spent privacy on records of this run's private data (" + set.description + ", run " +
                 set.origin + "): its ledger is carried and composed with this run's steps";
      return d;
    }
    if (!shared.known && unknown.empty()) {
      unknown = set.description + " of run " + set.origin + " was recorded under another record key than " +
                key.file.string();
    }
  }
  // The keyed hash part (|N=...|hash=...) alone: the same records in the same order under another name.
  const std::string mine = data.private_data->fingerprint(key);
  if (claimed && !source.data_fingerprint.empty() &&
      source.data_fingerprint.find(mine.substr(mine.rfind("|N="))) != std::string::npos) {
    throw std::runtime_error("run.init_from_disjoint: you state that this run's private data and the source's are "
                             "disjoint, but " + source.checkpoint.string() + " was trained on exactly this run's "
                             "private data " + data.private_data->name + " (the same keyed fingerprint in its "
                             "metadata): remove the statement, and the source's ledger is carried "
                             "(see docs/privacy.md#init_from-carrying-the-sources-ledger)");
  }
  if (claimed) {
    const std::string near_duplicates =
        check_near_duplicates ? check_near_duplicates() : "not checked for near-duplicates";
    d.reason = "init_from_disjoint: stated disjoint by the user: nothing carried";
    d.caveats.push_back(disjoint_caveat(source, "this run's private data share no person with the data it spent "
                                                "privacy on, so its ledger is not carried (" +
                                                (unknown.empty() ? "no shared record" : unknown) + "; " +
                                                near_duplicates + ")"));
  } else {
    d.carry = true;
    d.reason = (unknown.empty() ? std::string("the source spent privacy on private data, and records that differ in "
                                              "content can still show the same people (a changed pixel, a mirror image)")
                                : "the source spent privacy on data that cannot be compared with this run's (" + unknown +
                                      ")") +
               ": its ledger is carried and composed with this run's steps (" + opt_in +
               " if you know no one is in both; see docs/privacy.md#init_from-carrying-the-sources-ledger)";
  }
  return d;
}

std::vector<RecordSet> run_record_sets(const RunData& data, const RecordKey& key, const std::string& run_dir,
                                       const InitSource* source) {
  std::vector<RecordSet> sets;
  if (data.private_data) sets.push_back(private_record_set(*data.private_data, key, run_dir));
  for (const auto& pub : data.public_data) {
    const bool listed = std::any_of(sets.begin(), sets.end(), [&](const RecordSet& s) {
      return !s.is_private && s.origin == run_dir && s.hashes == pub.data->records;
    });
    if (!listed) sets.push_back(public_record_set(*pub.data, run_dir));
  }
  if (source && source->records) {
    sets.insert(sets.end(), source->records->begin(), source->records->end());
  } else if (source) {
    // Unknown ancestry: a private set under no key compares as unknown with any data downstream. Weights
    // from outside privdiff (no privdiff export) are marked so: their data are not privdiff's to protect
    // (their runs carry the imported-weights caveat), and prompts are not held against them.
    const bool outside = !source->imported.empty() && source->data_fingerprint.empty();
    sets.push_back(RecordSet{true, outside ? outside_weights_key : unknown_ancestry_key,
                             "the data of " + source->run_dir.string() + " (not recorded)", source->run_dir.string(), {}, {}});
  }
  return sets;
}

}  // namespace privdiff::core
