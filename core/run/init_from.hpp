#pragma once
// [run] init_from: a run that starts from another run's trained model (typically one public
// pretraining run reused by many private fine-tuning runs), and what it inherits from it.
//
// Privacy: the new model is a function of the source's. A source that spent privacy has its ledger
// carried into this run's (composed with this run's steps, so the reported epsilon covers both)
// unless the user states that this run's private data share no one with the private data of the
// source and its ancestry ([run] init_from_disjoint = true, which puts a caveat on the run).
// Content can show that records are the same (data/record_set.hpp: a copy, subset, reordering or
// class filter overlaps, and then the statement is refused), never that they are different people:
// a record with one pixel changed or mirrored hashes differently. So the statement is also checked
// for near-duplicates (data/near_duplicates.hpp) where the source's data can be opened, and refused
// when one is found. Each run keeps the record sets of its own data and its ancestry's in
// data-records.bin, so that data one ancestor used privately cannot be used as public data
// downstream, and the other way round.

#include "data/dataset_identity.hpp"
#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <privdiff/privacy/ledger.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

struct InitSource {
  std::filesystem::path run_dir;     ///< the source run directory
  std::filesystem::path checkpoint;  ///< its checkpoint.pt
  std::string checkpoint_hash;       ///< content hash of the checkpoint file
  std::string model_type;            ///< its recipe.toml's [model] type (empty: none recorded, taken to be this run's)
  sdk::PrivacyLedger ledger;         ///< everything the source spent (never the shorter of its two ledgers)
  bool finished = false;             ///< the source wrote summary.json
  /// What the source and its ancestry trained on (its data-records.bin); empty when unknown (a run
  /// made before records were kept, or a damaged file: records_note says which).
  std::optional<std::vector<RecordSet>> records;
  std::string records_note;
  bool carried = false;  ///< (read_recorded_init) whether the run carried the ledger, and why
  std::string reason;
  /// For weights from a safetensors file (a privdiff export, or weights from outside privdiff): the
  /// caveat every run started from them carries; empty for a run directory.
  std::string imported;
  /// A privdiff export's keyed fingerprint of the data its run trained on ("NAME|N=...|hash=...", one
  /// or several): equal to this run's private data's under the same record key, they are the same data.
  std::string data_fingerprint;
};

/// Throws std::runtime_error, at once, when `source`'s ledger has infinite epsilon (a Gaussian event with
/// noise multiplier 0 that is spent: not Poisson-subsampled at rate 0 nor composed zero times) and
/// `would_carry` (the user has not stated init_from_disjoint, or the run has no private data): no run that
/// carries that ledger has a guarantee. Pre-flight asks before it opens or compares any data.
void refuse_infinite_ledger(const InitSource& source, bool would_carry);

/// What a run that starts from `source` inherits, decided before anything is written.
struct InitDecision {
  bool carry = false;
  std::string reason;
  std::vector<std::string> caveats;  ///< set when [run] init_from_disjoint states what cannot be shown
};

/// The data a run trains on: its private dataset (null: none) and the public ones, by stage.
struct RunData {
  const DatasetIdentity* private_data = nullptr;
  struct Public {
    std::string stage;  ///< "stage[1] 'pretrain'", for messages
    const DatasetIdentity* data;
  };
  std::vector<Public> public_data;
};

/// Decides whether the source's ledger is carried (see above) and refuses, with
/// std::runtime_error, a run whose public data shares records with the source's private data, whose
/// private data the source trained on non-privately, or whose statement of disjointness the records
/// contradict. `disjoint_claimed`: the user's [run] init_from_disjoint; `check_near_duplicates`:
/// tests that statement beyond the shared records (throwing to refuse it) and says what it checked,
/// for its caveat; called only when the statement decides (null: not checked).
InitDecision decide_init_from(const InitSource& source, const RunData& data, bool disjoint_claimed,
                              const RecordKey& key, const std::function<std::string()>& check_near_duplicates = {});

/// The record sets a run keeps: its own data's (private keyed by `key`, public plain), then its
/// source's (or, when unknown, one set that compares as unknown with any data).
std::vector<RecordSet> run_record_sets(const RunData& data, const RecordKey& key, const std::string& run_dir,
                                       const InitSource* source);

/// Reads `path`: a run directory, a checkpoint.pt inside one, or safetensors weights (a .safetensors
/// file, or the folder `privdiff weights export` wrote). An export's ledger is read from its
/// metadata; weights from outside privdiff have none and no record of their data, so a private run
/// may start from them only with [run] init_from_disjoint = true (the user's statement that they are
/// public pretraining that shares no one with its private data). Throws std::runtime_error naming
/// what is missing or unreadable.
InitSource read_init_source(const std::filesystem::path& path);

/// What a run recorded in its init_from.json when it started (the source's details, and only the
/// carried part of its ledger), for resuming it. Throws std::runtime_error naming the file.
InitSource read_recorded_init(const std::filesystem::path& init_from_json);

/// {"private": [...], "public": [...]} as summary.json records it: each set's description and run.
nlohmann::json data_use_json(const std::vector<RecordSet>& sets);

}  // namespace privdiff::core
