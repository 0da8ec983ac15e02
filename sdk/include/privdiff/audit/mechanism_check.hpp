#pragma once
/// @file
/// check_mechanism: the checks of a private training mechanism's own code, in one call — what
/// `privdiff check-mechanism` runs and what a plugin's test suite calls:
///   (a) record replay (check/replay_check.hpp): the update on D and D + x, for extreme and typical
///       x, differs by at most the C the ledger claims, and nothing released or decided depends on x;
///   (b) noise (check/noise_calibration.hpp): the update's noise is the sigma C / (q N) the ledger
///       states, with a stated false-alarm probability;
///   (c) the one-run gradient-canary audit (audit/gradient_canaries.hpp): an empirical lower bound
///       on epsilon below the accountant's (run when an accountant is given).
/// (a) and (b) are exact tests of the mechanism's sensitivity and noise on a stand-in model (and on
/// another, the recipe's, when given: model_replay, model_noise); (c) is
/// a statistical lower bound, weak by design (a mechanism with half its noise can pass it; (b)
/// cannot). None of them proves privacy: they run the mechanism on small models and data and
/// look for the known ways of getting it wrong (docs/checking-a-mechanism.md#what-check-mechanism-proves-and-what-it-cannot).

#include <privdiff/audit/gradient_canaries.hpp>
#include <privdiff/check/mechanism_under_test.hpp>
#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/check/replay_check.hpp>
#include <privdiff/check/replay_report.hpp>
#include <privdiff/components/accountant.hpp>
#include <privdiff/components/auditor.hpp>
#include <privdiff/sdk_api.hpp>

#include <optional>
#include <string>

namespace privdiff::sdk::audit {

struct MechanismCheckOptions {
  double max_grad_norm = 1.0;  ///< C the mechanism is configured with: the sensitivity its ledger claims
  check::ReplayCheckOptions replay;  ///< (its max_grad_norm is set from the above)
  /// (a) also on another model (the recipe's: privdiff check-mechanism), when its model.make is set:
  /// its tensors of every kind (attention, embeddings, adapters), every parameter training.
  check::ReplayCheckOptions model_replay;
  check::NoiseCheckOptions noise;    ///< (likewise)
  /// (b) also on another model (the recipe's), when its model.make is set: per tensor, the next step
  /// and the declared releases on that model's tensors (its loss drawing the same noise in every
  /// replay), without the every-direction test. Named in the output by its label.
  check::NoiseCheckOptions model_noise;
  /// (c) runs with this accountant (null: skipped), calibrated to target_epsilon at delta.
  const Accountant* accountant = nullptr;
  double target_epsilon = 2.0, delta = 1e-5;
  GradientCanaryOptions canaries;
  const Auditor* auditor = nullptr;  ///< null: the one-run bound
};

struct MechanismCheck {
  check::Report replay;
  check::NoiseCheck noise;
  std::optional<check::NoiseCheck> model_noise;  ///< (b) on the other model; empty: not run
  std::string model_label;                       ///< its name in the output (", the recipe's model")
  std::optional<GradientCanaryAudit> canaries;  ///< empty: not run
  std::string canaries_error;    ///< a run of (c) stopped with this error: a failure
  bool passed() const {
    return replay.violations.empty() && noise.passed() && (!model_noise || model_noise->passed()) &&
           (!canaries || canaries->passed()) && canaries_error.empty();
  }
  /// Every figure and violation, one line each, with the verdict last.
  PRIVDIFF_SDK_API std::string describe() const;
};

/// Runs (a), (b) and (c) on the mechanism `make` builds.
PRIVDIFF_SDK_API MechanismCheck check_mechanism(const check::MechanismUnderTest& make, MechanismCheckOptions options);

}  // namespace privdiff::sdk::audit
