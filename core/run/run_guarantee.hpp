#pragma once
// A finished run's guarantee as what is published from the run directory states it — an export's
// metadata and model card, compare's table — re-derived by the release gate from the run's ledger,
// never read from summary.json or privacy.json: ledger.json agreed event by event with checkpoint.pt's
// copy (release::agreed_ledger), the checkpoint checked to be the run's own (the hash of the recipe it
// was trained under), and the ledger evaluated by the accountants of the run's recipe.toml at its delta.

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"
#include "release/privacy_statement.hpp"

#include <privdiff/privacy/ledger.hpp>

#include <filesystem>
#include <string>

namespace privdiff::core {

struct RunGuarantee {
  sdk::PrivacyLedger ledger;           ///< the run's ledger, its two records agreed
  release::PrivacyStatement statement; ///< from `ledger` (no delta, no results for a recipe without a delta)
  std::string note;                    ///< release::AgreedLedger's note (a record ahead of the other)
};

/// Throws release::ReleaseRefused naming both files unless `checkpoint` was trained under `recipe_file`
/// (the recipe hash it recorded is recipe.toml's): an edited recipe.toml, or a checkpoint from another
/// run. std::runtime_error naming a file that cannot be read.
void check_checkpoint_of_run(const std::filesystem::path& checkpoint, const std::filesystem::path& recipe_file);

/// The guarantee of the run in `run_dir`, whose recipe.toml is `recipe` (validated, with `registry`'s
/// plugins) and whose published weights are `checkpoint` (checked with check_checkpoint_of_run when the
/// file exists). Throws release::ReleaseRefused when the records disagree or the guarantee's accountant
/// is an approximation the recipe did not allow; std::runtime_error naming a file that cannot be read.
RunGuarantee run_guarantee(const std::filesystem::path& run_dir, const std::filesystem::path& checkpoint,
                           const Recipe& recipe, const ComponentRegistry& registry);

}  // namespace privdiff::core
