#pragma once
// A finished run's model as published (`privdiff weights export`, a sweep's selected model), with the
// guarantee the gate derives from the run's ledger (core/run's run_guarantee: ledger.json agreed with
// checkpoint.pt's copy, evaluated by the run's recipe's accountants) in its metadata and model card.
// summary.json only says that the run finished and what it trained on; no privacy figure is taken from
// it. A ledger that spent more than summary.json's statement covered (the run went on after it finished)
// refuses the export.

#include "recipe/recipe.hpp"
#include "release/privacy_statement.hpp"
#include "weights/model_export.hpp"

#include <privdiff/components/model.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace privdiff::core::release {

/// The caveat an export carries when a stage drew reproducible noise (secure_noise = false) from seed 0,
/// privdiff's public default: anyone can reproduce that noise.
std::string public_seed_caveat();

/// Whether a stage of `recipe` draws reproducible noise from seed 0 (its own seed, or else [run] seed).
bool draws_noise_from_public_seed(const Recipe& recipe);

/// The run's guarantee as one JSON object: "private", "accountant", "epsilon" (each accountant's),
/// "delta", "ledger_steps" and the "ledger" — every one from `statement` and `ledger` —, and "data",
/// "data_use" and "target_epsilon" from summary.json; "caveats" are the statement's joined with
/// summary.json's. Throws std::runtime_error naming summary.json when the run has not finished (its
/// guarantee is not final), ReleaseRefused when `ledger` holds steps summary.json's statement did not
/// cover, or spent privacy the statement has no epsilon for.
nlohmann::json run_export_statement(const std::filesystem::path& run_dir, const PrivacyStatement& statement,
                                    const sdk::PrivacyLedger& ledger);

/// weights' export_run_model with the statement above in its card and metadata (privdiff.epsilon,
/// privdiff.delta, privdiff.accountant, privdiff.privacy); `recipe` is the run's recipe.toml, for the
/// public-seed caveat.
ModelExport export_run(const std::filesystem::path& run_dir, sdk::Model& model, const Recipe& recipe,
                       const PrivacyStatement& statement, const sdk::PrivacyLedger& ledger);

}  // namespace privdiff::core::release
