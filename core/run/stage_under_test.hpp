#pragma once
// A recipe's private DP-SGD-style stage as the mechanism checks run it (privdiff check-mechanism,
// privdiff audit): the stage's own mechanism plugin, built anew for every run of a check with the
// check's settings and the recipe's values for everything else (sdk check/mechanism_under_test.hpp).

#include "loader/component_registry.hpp"
#include "recipe/recipe.hpp"

#include <privdiff/check/mechanism_under_test.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace privdiff::core {

struct StageUnderTest {
  std::size_t index = 0;
  std::string name;          ///< the stage's name
  std::string mechanism;     ///< its mechanism's id
  std::string plugin;        ///< the library it comes from
  double max_grad_norm = 0;  ///< C: the sensitivity its ledger claims (DP-SGD-style stages)
  sdk::check::MechanismUnderTest make;  ///< valid while `registry` is (DP-SGD-style stages)
  /// A private stage without DP-SGD's keys, which releases noisy statistics (only with
  /// `allow_statistics`): run/statistic_stage_check.hpp checks it; max_grad_norm and make are unset.
  bool releases_statistics = false;
};

/// The stage named `stage` (empty: the recipe's only private stage with DP-SGD's keys; with
/// `allow_statistics`, failing that, its only private stage). A UsageError names the recipe file, the stage and why it
/// cannot be checked (not private; without `allow_statistics`, a mechanism without DP-SGD's keys);
/// `verb` says what the caller does ("audit", "check").
StageUnderTest stage_under_test(const Recipe& recipe, const ComponentRegistry& registry, const std::string& stage,
                                const std::string& recipe_file, const std::string& verb, bool allow_statistics = false);

}  // namespace privdiff::core
