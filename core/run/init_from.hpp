#pragma once
// [run] init_from: a run that starts from another run's trained model (typically one public
// pretraining run reused by many private fine-tuning runs), and what it inherits from it.
//
// Privacy: the new model is a function of the source's. If the source spent privacy on the data
// this run protects (or this run protects none), its ledger is carried into this run's ledger and
// composed with this run's steps, so the reported epsilon covers both. If the source trained only
// on public data, nothing is carried. What each run trained on, privately and publicly, travels
// in summary.json's "data_use" (with the ancestry's), so data one ancestor used privately cannot
// be used as public data downstream.

#include <privdiff/privacy/ledger.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
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
  /// Fingerprints of the data the source (and its ancestry) trained on privately / publicly; empty
  /// when unknown (a run from before this was recorded).
  std::vector<std::string> private_data, public_data;
  bool data_use_known = false;
  bool carried = false;  ///< (read_recorded_init) whether the run carried the ledger, and why
  std::string reason;
};

/// Reads `path` (a run directory, or a checkpoint.pt inside one). Throws std::runtime_error naming
/// what is missing or unreadable.
InitSource read_init_source(const std::filesystem::path& path);

/// What a run recorded in its init_from.json when it started (the source's details, and only the
/// carried part of its ledger), for resuming it. Throws std::runtime_error naming the file.
InitSource read_recorded_init(const std::filesystem::path& init_from_json);

/// {"private": [...], "public": [...]} as summary.json records it.
nlohmann::json data_use_json(const std::vector<std::string>& private_data, const std::vector<std::string>& public_data);

}  // namespace privdiff::core
