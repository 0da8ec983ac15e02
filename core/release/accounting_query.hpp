#pragma once
// `privdiff account`'s work: what each accountant says of a privacy event (a schedule, a history, a run's
// ledger) — epsilon at a delta, delta at an epsilon, or the noise multiplier that meets a target — with
// the gate's own judgement of each figure (release::certifies_upper_bound: an approximation is marked
// and warned about). The command parses, calls this and prints.

#include "loader/component_registry.hpp"

#include <privdiff/components/privacy_event.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace privdiff::core::release {

/// A schedule whose noise multiplier --calibrate finds: `sample_rate` for `steps`, after what was spent.
struct CalibratedSchedule {
  double sample_rate = 0;
  std::int64_t steps = 0;
  double target_epsilon = 0;
  std::optional<double> tolerance;  ///< relative; default 1e-4 for prv, 1e-10 otherwise
};

struct AccountingQuestion {
  sdk::PrivacyEvent spent = sdk::PrivacyEvent::no_op();  ///< with `calibrate`: what was spent before it
  std::optional<CalibratedSchedule> calibrate;
  double delta = 0;                ///< epsilon is asked at it (and the calibration's target)
  std::optional<double> epsilon;   ///< delta is asked at it instead (not with `calibrate`)
  std::string conversion = "improved";  ///< for accountants that take one (RDP's)
  std::vector<std::string> accountants;  ///< by id; empty: every installed one, skipping those that cannot
};

struct AccountingAnswer {
  /// Per accountant: {"accountant", "epsilon", "delta", its details, "noise_multiplier" (calibrate),
  /// "upper_bound": false and "warnings" where it is an approximation}.
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();  ///< {"accountant", "reason"}
};

/// `spent`, then `schedule` at noise multiplier `sigma` (spent may be no_op).
sdk::PrivacyEvent then_schedule(const sdk::PrivacyEvent& spent, const CalibratedSchedule& schedule, double sigma);

/// Asks every accountant of `question`. Throws UsageError for an unknown accountant or one named that
/// cannot evaluate the events (or fails), and when no accountant can.
AccountingAnswer answer(const ComponentRegistry& registry, const AccountingQuestion& question);

}  // namespace privdiff::core::release
