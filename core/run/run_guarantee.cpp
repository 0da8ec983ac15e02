#include "run/run_guarantee.hpp"

#include "release/ledger_agreement.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_ledger.hpp"
#include "util/atomic_file.hpp"

#include <privdiff/components/accountant.hpp>

#include <memory>
#include <vector>

namespace privdiff::core {

namespace fs = std::filesystem;

void check_checkpoint_of_run(const fs::path& checkpoint, const fs::path& recipe_file) {
  release::check_checkpoint_recipe(checkpoint, read_checkpoint_recipe_sha(checkpoint), recipe_file, read_file(recipe_file));
}

RunGuarantee run_guarantee(const fs::path& run_dir, const fs::path& checkpoint, const Recipe& recipe,
                           const ComponentRegistry& registry) {
  std::error_code ec;
  if (fs::is_regular_file(checkpoint, ec)) check_checkpoint_of_run(checkpoint, run_dir / "recipe.toml");
  const RunLedger spent = read_run_ledger(run_dir);
  RunGuarantee g;
  g.ledger = spent.ledger;
  g.note = spent.note;
  if (recipe.privacy.has("delta")) {
    // The accountants the run reported with, as its recipe configures them: the guarantee's first.
    std::vector<std::unique_ptr<sdk::Accountant>> owned;
    release::NamedAccountants accountants;
    for (const auto& id : recipe.accountant_ids) {
      const auto config = recipe.accountants.find(id);
      if (config == recipe.accountants.end()) continue;  // (the validator configures every one it lists)
      owned.push_back(create_component<sdk::Accountant>(registry, id, config->second));
      accountants.emplace_back(id, owned.back().get());
    }
    const bool approximation_allowed =
        recipe.privacy.has("allow_approximate_accountant") && recipe.privacy.get_bool("allow_approximate_accountant");
    g.statement = release::run_statement(g.ledger, accountants, recipe.privacy.get_double("delta"), approximation_allowed);
  } else {
    for (const auto& caveat : g.ledger.caveats()) g.statement.add_caveat(caveat);
  }
  // As in the run's own reports: the ledger and the statement carry the same caveats.
  for (const auto& caveat : g.statement.caveats) g.ledger.add_caveat(caveat);
  g.statement.caveats = g.ledger.caveats();
  return g;
}

}  // namespace privdiff::core
