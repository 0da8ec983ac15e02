#pragma once
// Runs a composed recipe: plans and checks the privacy budget, calibrates an "auto" noise
// multiplier, runs the stages in order, and writes the run directory:
//   recipe.toml   the resolved recipe (every default written out)
//   ledger.json   every privacy event spent (rewritten after each stage; never reset)
//   privacy.json  epsilon under every accountant the recipe names

#include "recipe/recipe.hpp"
#include "run/composed_run.hpp"

#include <privdiff/config/config.hpp>
#include <privdiff/data/dataset.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>

namespace privdiff::core {

using DatasetOpener = std::function<std::unique_ptr<sdk::Dataset>(const sdk::Config& data)>;

struct AccountantResult {
  std::string accountant;
  sdk::EpsilonResult result;
};

struct RunSummary {
  std::filesystem::path run_dir;
  sdk::PrivacyLedger ledger;
  std::vector<AccountantResult> privacy;  ///< empty when the recipe sets no delta
};

class RunOrchestrator {
 public:
  RunOrchestrator(const Recipe& recipe, ComposedRun components, DatasetOpener open_dataset);

  /// Runs into `run_dir`, which must not exist or be empty (nothing already there is ever
  /// overwritten). Progress goes to `log`. Throws std::runtime_error with context on failure.
  RunSummary run(const std::filesystem::path& run_dir, std::ostream& log);

 private:
  sdk::PrivacyEvent plan_privacy(std::int64_t dataset_size, std::ostream& log);
  const sdk::Accountant& main_accountant() const;

  const Recipe& recipe_;
  ComposedRun components_;
  DatasetOpener open_dataset_;
};

}  // namespace privdiff::core
