#pragma once
// A finished run's model as published (`privdiff weights export`, a sweep's selected model): the
// statement the gate wrote into the run's summary.json, checked against the ledger the run wrote
// (ledger.json) before it goes into the export's metadata and model card. A ledger that spent more
// than the statement covers (the run went on after it was made) refuses the export; caveats the ledger
// carries and the statement lacks are joined in.

#include "weights/model_export.hpp"

#include <privdiff/components/model.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>

namespace privdiff::core::release {

/// The run's guarantee as one JSON object: "private", "accountant", "epsilon" (each accountant's),
/// "delta", "target_epsilon", "ledger_steps", "data", "data_use", "caveats" and the "ledger". Throws
/// std::runtime_error naming summary.json when the run has not finished (its guarantee is not final),
/// ReleaseRefused when ledger.json holds steps the statement does not cover.
nlohmann::json run_export_statement(const std::filesystem::path& run_dir);

/// weights' export_run_model with the statement above in its card and metadata (privdiff.epsilon,
/// privdiff.delta, privdiff.accountant, privdiff.privacy).
ModelExport export_run(const std::filesystem::path& run_dir, sdk::Model& model);

}  // namespace privdiff::core::release
