#pragma once
// What `privdiff compare` reads from a finished run directory: summary.json, eval.json (when the run
// was evaluated) and metrics.jsonl (the loss curve); and its guarantee, which the release gate derives
// from the run's ledger (core/run's run_guarantee), never privacy.json's or summary.json's figures.

#include "release/privacy_statement.hpp"

#include <privdiff/privacy/ledger.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

struct RunRecord {
  std::filesystem::path dir;
  std::string name;
  nlohmann::json summary;   ///< summary.json
  /// The guarantee in privacy.json's form (release::run_privacy_json), set by use_guarantee from the
  /// gate's statement; null until then.
  nlohmann::json privacy;
  nlohmann::json eval;      ///< eval.json (in the current form: evaluation_in_current_form), or null
  sdk::PrivacyLedger ledger;  ///< the run's ledger, set by use_guarantee
  /// The training loss of one stage (metrics.jsonl), by step within the stage; a stage without
  /// one (a private stage without [run] private_diagnostics) has `missing` saying why.
  struct StageLoss {
    std::string stage;
    std::vector<std::pair<std::int64_t, double>> points;
    std::string missing;
  };
  std::vector<StageLoss> losses;  ///< in the order of summary.json's stages
  std::int64_t steps = 0;   ///< logical steps in the ledger
};

/// eval.json as privdiff writes it now: {"evaluators": {ID: {"metrics", "provenance", ...}}, ...}.
/// Results of privdiff < 0.10 (top-level "accuracy", "frechet_distance", ...) become the
/// dpdm_classifiers and feature_cnn evaluators' results they are.
nlohmann::json evaluation_in_current_form(nlohmann::json eval);

/// Throws std::runtime_error naming the directory and the missing or broken file. Its guarantee is
/// use_guarantee's to set.
RunRecord load_run_record(const std::filesystem::path& dir);

/// The run's privacy, ledger and logical steps from the release gate's `statement` of its `ledger`.
void use_guarantee(RunRecord& r, const release::PrivacyStatement& statement, const sdk::PrivacyLedger& ledger);

/// The first `steps` logical steps of a ledger (an entry SelfComposed(e, n) counts n steps).
sdk::PrivacyEvent ledger_prefix(const sdk::PrivacyLedger& ledger, std::int64_t steps);

}  // namespace privdiff::core
