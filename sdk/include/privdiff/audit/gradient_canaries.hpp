#pragma once
/// @file
/// White-box audit of a DP-SGD engine with Dirac gradient canaries, in one training run (Steinke,
/// Nasr, Jagielski 2023; the gradient-canary setting of Nasr et al. 2021/2023).
///
/// The engine under audit (a DpSgdMechanism, its run() unchanged) trains a canary model: two
/// per-example Linear layers, no bias, loss = w . x, so an example's gradient *is* its input.
/// Canary i is an example whose input is canary_norm * C on one coordinate of its own (spread over
/// both layers) and zero elsewhere: a Dirac gradient that clipping must bring down to C. Each canary
/// is in the data independently with probability 1/2; filler examples (random inputs on coordinates
/// no canary uses, norms around C) make batches realistic. The model starts at zero and trains with
/// plain SGD (lr 1, no momentum, decay or EMA), so theta_0 - theta_T is the sum of the released noisy
/// gradients; canary i's score is that sum on its coordinate. An included canary adds
/// C / (q N) each time it is sampled, an excluded one nothing; the noise is all that hides which.
/// audit_canary_scores turns the scores into eps_lower, to set beside the accountant's epsilon.
///
/// A mechanism that reads public data (Mechanism::public_data_name: GEP's anchor gradients) is given
/// GradientCanaryOptions::public_data as canary-model examples on the fillers' coordinates: each public
/// image's channels averaged, area-averaged to 8x8 (the 64 filler coordinates) and scaled to norm C.
///
/// What it catches: anything that lets a canary's contribution stand out more than the accountant
/// assumes — too little noise (wrong scale, divided by sqrt(K), split over physical chunks),
/// missing or partial clipping, wrong sensitivity. It does not see bugs that keep the per-step
/// signal-to-noise ratio (dividing by the realised batch size scales signal and noise alike).

#include <privdiff/audit/one_run_bound.hpp>
#include <privdiff/check/mechanism_under_test.hpp>
#include <privdiff/components/accountant.hpp>
#include <privdiff/components/auditor.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace privdiff::sdk::audit {

struct GradientCanaryOptions {
  std::int64_t canaries = 5000;  ///< m: each in the data with probability 1/2
  std::int64_t fillers = 1000;   ///< ordinary examples beside the canaries
  /// A canary gradient's norm, in units of C (> 1: clipping must act; 10: a mechanism that does not
  /// clip gives its canaries 10 times the weight, which the bound shows even at epsilon 10).
  double canary_norm = 10.0;
  double sampling_rate = 1.0;    ///< q of the audited run (batch_size = q N); 1 gives the strongest audit
  std::uint64_t seed = 0;        ///< canary placement and inclusion (not the engine's noise)
  double confidence = 0.95;
  /// The mechanism's public data (null: none), given to every run as StageContext::public_data in the
  /// canary model's records (see the file comment). Must outlive the call.
  const Dataset* public_data = nullptr;
};

struct GradientCanaryAudit {
  AuditResult bound;         ///< eps_lower and the guesses behind it
  double reported_epsilon = 0.0;   ///< the accountant's epsilon for what the engine recorded
  double delta = 0.0;
  double noise_multiplier = 0.0;   ///< the engine's sigma (calibrated when the options said "auto")
  std::int64_t dataset_size = 0;   ///< N: included canaries + fillers
  std::int64_t steps = 0;          ///< logical steps recorded in the ledger
  std::vector<double> scores;      ///< per canary, higher = looks included
  std::vector<bool> included;      ///< per canary, the truth
  /// A correct engine and accountant give eps_lower <= reported epsilon (with the confidence).
  bool passed() const { return bound.epsilon_lower <= reported_epsilon; }
};

/// Builds the mechanism to audit from the options the harness prepared (default: DpSgdMechanism).
using DpSgdFactory = std::function<std::unique_ptr<engine::DpSgdMechanism>(const engine::DpSgdOptions&)>;

/// Audits the engine configured by `options` (K, clip mode, C, physical batch size, steps or epochs,
/// secure or seeded noise; its optimizer, lr, EMA, augmentation, parameter selection and batch size
/// are replaced as described above). A noise multiplier of "auto" is calibrated with `accountant`
/// to `target_epsilon` (ignored otherwise); the reported epsilon is `accountant`'s for the ledger the
/// run wrote. The scores become a bound through `auditor` (null: audit_canary_scores, the one-run
/// bound). Throws std::invalid_argument for non-private options or bad audit options.
PRIVDIFF_SDK_API GradientCanaryAudit audit_with_gradient_canaries(engine::DpSgdOptions options,
                                                                  const Accountant& accountant, double target_epsilon,
                                                                  double delta, const GradientCanaryOptions& audit,
                                                                  const DpSgdFactory& factory = nullptr,
                                                                  const Auditor* auditor = nullptr);

/// The same audit of any mechanism under test (a plugin's own code: check/mechanism_under_test.hpp)
/// whose ledger states sensitivity `max_grad_norm` (C): `settings` gives its steps, noise multiplier
/// (empty: calibrated to `target_epsilon`), physical chunks and seed (empty: secure noise); the audit
/// sets the batch size and the training settings described above.
PRIVDIFF_SDK_API GradientCanaryAudit audit_with_gradient_canaries(const check::MechanismUnderTest& make,
                                                                  check::MechanismSettings settings,
                                                                  double max_grad_norm, const Accountant& accountant,
                                                                  double target_epsilon, double delta,
                                                                  const GradientCanaryOptions& audit,
                                                                  const Auditor* auditor = nullptr);

}  // namespace privdiff::sdk::audit
