// The run directory phase: create it (or check and reopen it on --resume), write recipe.toml and
// the data-records file before training, initialise from init_from, open ledger.json and metrics.jsonl.
#include "run/run_session.hpp"

#include "data/record_key.hpp"
#include "release/privacy_statement.hpp"
#include "run/run_ledger.hpp"

#include <privdiff/parallel/collective.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// Every rank must run rank 0's run: the same resolved recipe (a rank started with other --set
// values would train another σ or schedule) and the same data (a node reading other files would
// train on records rank 0's ledger is not about), with the same plugins' code (a node with another
// mechanism library would add other noise). Checked on a hash of them, before anything is written; a
// rank that differs refuses the run on every rank.
void same_run_as_rank0(sdk::Collective& ranks, const std::string& recipe_and_data) {
  std::uint64_t h = 0;
  std::istringstream(content_hash(recipe_and_data)) >> std::hex >> h;
  at::Tensor rank0 = at::full({1}, static_cast<std::int64_t>(h), at::kLong);
  ranks.broadcast(rank0, 0);
  const bool differs = static_cast<std::uint64_t>(rank0.item<std::int64_t>()) != h;
  agree_to_start(ranks, differs ? "its recipe (with --set) or its data differ from rank 0's, or its plugins' code "
                                  "does: every rank must run the same recipe on the same data with the same libraries"
                                : "");
}

// A resumed run runs the code it was started with: its noise was calibrated, and its ledger written,
// by those libraries. A checkpoint of an older privdiff has no record: resumed with a warning.
void check_same_code(RunSession& s, const CheckpointPosition& position, const std::string& refused) {
  if (s.options.libraries.empty()) return;  // an embedding host that records none
  if (position.component_libraries.empty()) {
    s.log << "warning: " << s.checkpoint_path().string() << " does not record its components' libraries (written by "
          << "an older privdiff): the resumed run cannot be checked to run the code it was started with\n";
    return;
  }
  std::vector<ComponentLibrary> recorded;
  try {
    recorded = component_libraries_from_json(nlohmann::json::parse(position.component_libraries));
  } catch (const std::exception& e) {
    throw RunRefused(refused + s.checkpoint_path().string() + ": its record of the components' libraries is damaged (" +
                     e.what() + ")");
  }
  const std::string difference = library_difference(recorded, s.options.libraries);
  if (!difference.empty()) {
    throw RunRefused(refused + difference + "; a resumed run must run the code it was started with (restore that "
                               "library, or start a new run)");
  }
}

}  // namespace

void RunOrchestrator::open_run_directory(RunSession& s) {
  // The run's recipe is its recipe.toml as first written; a resumed run is checked against it.
  const std::string recipe_text = s.options.resume ? read_file(s.run_dir / "recipe.toml") : recipe_.to_toml();
  s.recipe_sha = content_hash(recipe_text);
  // What the stages train on, for the checkpoint and the resume check (keyed: run directories may
  // be published) and for the ranks' check (plain, exchanged only).
  const RecordKey& key = record_key();
  for (const auto& [name, id] : s.identities) {  // one dataset: its fingerprint alone
    const std::string prefix = s.identities.size() == 1 ? "" : (s.data_fingerprint.empty() ? "" : "; ") + name + "=";
    s.data_fingerprint += prefix + id.fingerprint(key);
    s.data_digest += prefix + std::to_string(id.ordered_digest);
  }
  if (s.options.collective) {
    std::string code;  // each component's library by content (paths differ between machines)
    for (const auto& c : s.options.libraries) code += "|" + c.kind + ":" + c.id + "=" + (c.sha256.empty() ? c.library : c.sha256);
    same_run_as_rank0(*s.options.collective, s.recipe_sha + "|" + s.data_digest + code);
  }
  if (!s.options.resume && !s.writes()) {
    // Another rank of a multi-process run: rank 0 writes the directory; this one only trains.
  } else if (!s.options.resume) {
    std::error_code ec;
    fs::create_directories(s.run_dir, ec);
    if (ec) throw std::runtime_error("cannot create run directory " + s.run_dir.string() + ": " + ec.message());
    write_file_atomically(s.run_dir / "recipe.toml", recipe_text);
    if (s.restart) {
      // Killed before its first checkpoint: the steps it took are redone and spent again; what it
      // spent stays (its ledger.json, carried entries included), its metrics start over.
      std::error_code ec;
      if (fs::is_regular_file(s.run_dir / "ledger.json", ec)) s.summary.ledger = resumed_ledger(s.run_dir).ledger;
      remove_stale_temporary_files(s.run_dir);
      fs::resize_file(s.metrics_path(), 0, ec);
      s.log << "no checkpoint yet: the run starts over in place; the privacy it spent stays in the ledger\n";
    }
    // What the run trains on, by content, before it trains: a run killed at any point is known to
    // a later run that starts from it.
    s.record_sets = run_record_sets(run_data(s), key, fs::absolute(s.run_dir).string(), s.init ? &*s.init : nullptr);
    write_file_atomically(s.run_dir / record_sets_file, record_sets_to_bytes(s.record_sets));
    if (s.init) initialise_from_source(s);
  } else {
    if (!components_.model) throw std::runtime_error("cannot resume: the recipe has no [model]");
    // Refusals here are bad input (exit 2), and nothing has been written yet.
    const std::string refused = "cannot resume " + s.run_dir.string() + ": ";
    try {
      s.resumed = load_checkpoint(s.checkpoint_path(), *components_.model);
    } catch (const std::runtime_error& e) {  // damaged, or another model's
      throw RunRefused(refused + e.what());
    }
    const CheckpointPosition& position = s.resumed->position;
    if (position.recipe_sha != s.recipe_sha) {
      throw RunRefused(refused + "its recipe.toml changed since the checkpoint was written (a resumed run "
                               "must be the run that was started; start a new run for a changed recipe)");
    }
    if (!position.data_fingerprint.empty() && position.data_fingerprint != s.data_fingerprint) {
      throw RunRefused(refused + "the data differs from the data it trained on (checkpoint: " +
                               position.data_fingerprint + "; now: " + s.data_fingerprint +
                               "); its ledger accounts for those records only");
    }
    check_same_code(s, position, refused);
    // Data released by stages that finished before the checkpoint: from the run directory.
    for (const auto& [name, stage] : s.released) {
      if (static_cast<std::int64_t>(stage) < position.stage) {
        open_released(s, name, public_classes());
      }
    }
    const auto& saved = position.noise_multipliers;
    for (std::size_t i = 0; i < noise_multipliers_.size(); ++i) {
      if (i >= saved.size() || !same_sigma(saved[i], noise_multipliers_[i])) {
        throw RunRefused("cannot resume: stage[" + std::to_string(i) + "]'s noise multiplier differs from "
                                 "the checkpoint's (did the dataset or a plugin change?)");
      }
    }
    // Spent privacy never shrinks: ledger.json may also hold steps done after the checkpoint by a
    // run that then failed or was killed. Those stay spent, and their redone steps are spent again.
    const RunLedger spent = resumed_ledger(s.run_dir);
    s.summary.ledger = spent.ledger;
    if (!spent.note.empty()) s.log << spent.note << "; the steps redone from the checkpoint are spent again\n";
    if (s.writes()) {
      if (const int stale = remove_stale_temporary_files(s.run_dir); stale > 0) {
        s.log << "removed " << stale << " temporary file(s) left by the interrupted run\n";
      }
      // Lines written after the checkpoint belong to steps that are about to be redone.
      std::error_code ec;
      fs::resize_file(s.metrics_path(), position.metrics_bytes, ec);
      if (ec) throw std::runtime_error("cannot rewind " + s.metrics_path().string() + ": " + ec.message());
    }
    if (std::error_code ec; fs::is_regular_file(s.run_dir / record_sets_file, ec)) {
      try {
        s.record_sets = record_sets_from_bytes(read_file(s.run_dir / record_sets_file));
      } catch (const std::exception& e) {
        throw std::runtime_error(refused + (s.run_dir / record_sets_file).string() + ": " + e.what());
      }
    }
    s.earlier_seconds = position.wall_seconds;
    s.earlier_cpu_seconds = position.cpu_seconds;
    for (std::size_t i = 0; i < position.stage_seconds.size(); ++i) {
      if (std::isfinite(position.stage_seconds[i])) s.stage_seconds[i] = position.stage_seconds[i];
    }
    s.log << "resuming at stage " << position.stage << ", step " << position.step
          << " (privacy spent so far is kept in the ledger)\n";
  }
  if (recipe_.run.get_bool("private_diagnostics") && any_private(components_)) {
    s.summary.ledger.add_caveat(private_diagnostics_caveat);
  }
  if (approximate_guarantee_) s.summary.ledger.add_caveat(release::approximation_caveat(recipe_.privacy.get_string("accountant")));
  for (const auto& caveat : s.data_caveats) s.summary.ledger.add_caveat(caveat);
  s.write_ledger();
  if (s.writes()) s.metrics.open(s.run_dir);
}

void RunOrchestrator::initialise_from_source(RunSession& s) {
  const InitSource& src = *s.init;  // its weights were loaded in pre-flight
  if (s.carry && s.summary.ledger.entries().empty()) {  // a restart's ledger already holds them
    for (const auto& entry : src.ledger.entries()) s.summary.ledger.record(entry);
    for (const auto& caveat : src.ledger.caveats()) s.summary.ledger.add_caveat("init_from: " + caveat);
  }
  for (const auto& caveat : s.init_caveats) s.summary.ledger.add_caveat(caveat);
  nlohmann::json record = {{"source", src.run_dir.string()},
                           {"checkpoint", src.checkpoint.string()},
                           {"checkpoint_hash", src.checkpoint_hash},
                           {"source_finished", src.finished},
                           {"carried", s.carry},
                           {"reason", s.carry_reason},
                           {"carried_ledger", nlohmann::json::parse(sdk::to_json(s.carry ? src.ledger : sdk::PrivacyLedger{}))}};
  write_file_atomically(s.run_dir / "init_from.json", record.dump(2) + "\n");
}

}  // namespace privdiff::core
