#pragma once
// The release gate: the one place in privdiff that turns what runs spent into the privacy statements
// it publishes — a run's privacy.json (and the privacy figures of its summary), a sweep's privacy.json,
// and the guarantee in an export's metadata and model card. Plans propose, ledgers decide: a statement
// is computed from the ledgers the runs wrote, never from what a plan said they would spend, and it
// carries the union of every contributing ledger's caveats. Commands and the run's reports call it;
// none of them assembles a guarantee itself (scripts/check_layout.py holds every writer of privacy.json
// and of the export's privacy keys to core/release/).

#include <privdiff/components/accountant.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::core::release {

/// A release the gate will not make, with why (what was planned, what was spent, what to do).
class ReleaseRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PrivacyStatement {
  bool is_private = false;
  double epsilon = 0;       ///< the guarantee, by `accountant`
  double delta = 0;
  std::string accountant;   ///< whose figure is the guarantee
  /// Every accountant's figure: {"accountant", "epsilon" | "error", its details, "warnings",
  /// "upper_bound": false for an approximation}.
  nlohmann::json results = nlohmann::json::array();
  /// The union of the caveats of every ledger that fed the artefact, and the gate's own.
  std::vector<std::string> caveats;
  /// What one record is, the unit the guarantee protects (privacy_unit); empty when the run says none.
  std::string privacy_unit;

  /// Adds `caveat` unless an equal one is there.
  void add_caveat(const std::string& caveat);
};

/// The accountants a run reports, the guarantee's first.
using NamedAccountants = std::vector<std::pair<std::string, const sdk::Accountant*>>;

/// Whether `accountant`'s figure for `result` is an upper bound: it says so (Accountant::is_upper_bound)
/// and none of its warnings says "not an upper bound".
bool certifies_upper_bound(const sdk::Accountant& accountant, const sdk::EpsilonResult& result);

/// The caveat a guarantee by an approximate accountant carries ([privacy] allow_approximate_accountant).
std::string approximation_caveat(const std::string& accountant_id);

/// A run's statement: `ledger` (what the run wrote) evaluated by each accountant at `delta`; the first
/// accountant's epsilon is the guarantee. A guarantee by an accountant that does not certify an upper
/// bound is refused (ReleaseRefused) unless `approximation_allowed`, and then carries a caveat.
PrivacyStatement run_statement(const sdk::PrivacyLedger& ledger, const NamedAccountants& accountants, double delta,
                               bool approximation_allowed);

/// The sentence privacy.json gives as "privacy_unit": what one record of `data` (the private data) is,
/// and so what adding or removing one changes: "one record of D: an image with its label" or, for
/// captioned data, "… an image with its label and its caption (the caption is as private as the image)".
std::string privacy_unit(const std::string& data_name, bool captioned);

/// privacy.json of a run: {"ledger", "caveats", "privacy_unit", "delta", "results", "epsilon", "accountant"}; without
/// "delta" and "results" for a statement of no delta (a recipe that sets none), without "epsilon" and
/// "accountant" when the guarantee's accountant could not evaluate the ledger.
nlohmann::json run_privacy_json(const PrivacyStatement& statement, const sdk::PrivacyLedger& ledger);

/// Writes DIR/privacy.json (atomically, 0644: it is what may be published).
void write_privacy_json(const std::filesystem::path& dir, const nlohmann::json& report);

/// Adds `caveat` to the "caveats" of DIR/privacy.json and DIR/summary.json where they exist (a use of
/// the private data after the run: privdiff eval scoring against it). Atomic per file; throws
/// std::runtime_error naming the file it cannot update.
void add_caveat_to_reports(const std::filesystem::path& dir, const std::string& caveat);

}  // namespace privdiff::core::release
