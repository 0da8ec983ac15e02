#pragma once
/// @file
/// The noise check: is the noise on a mechanism's update the sigma C / (q N) its ledger states, on every
/// tensor, and drawn afresh at every step?
///
/// The mechanism under test takes two logical steps on fixed data with q = 1 (every record in the
/// batch), plain SGD with a small learning rate (1e-3) and a deterministic stand-in model (ReplayModel
/// without loss noise: conv, group-norm and linear tensors), `replays` times with different seeds. Each
/// step's update over the learning rate is its noised gradient; at the first step the clipped sum is the
/// same in every replay, so the releases differ by the noise alone. The sample variance of the release's
/// coordinates around their mean, times (q N / C)^2, estimates sigma^2 with d (R - 1) degrees of freedom
/// (d coordinates, R replays). The check fails when sigma_hat / sigma falls outside the chi-square band
/// of two-sided probability `false_alarm` (Wilson-Hilferty)
///   - pooled over every coordinate of the first step (low, high below),
///   - for each parameter tensor on its own (noise missing or scaled on a few tensors hides in the pooled
///     figure; the worst tensor is named),
///   - for the second step's update, and for the difference of the two steps' updates over sqrt(2) (both
///     steps' noise, independent: noise reused from the first step leaves the difference nearly noiseless),
///   - in every direction of the parameter space (2 d + 1 one-step replays: the smallest eigenvalue of
///     the releases' sample covariance against the Marchenko-Pastur edge), so that a noiseless subspace
///     that crosses tensors shows,
///   - for each release the mechanism declares (DpSgdMechanism::release_statistic) at the first step,
///     against the noise std it states,
/// the per-tensor, second-step and release bands each at false_alarm / (tensors + 2 + releases), so a
/// correct mechanism fails with probability at most 2 false_alarm; or when the ledger records another
/// event than the two steps it was configured with (the declared releases composed into each). Every
/// replay after the first starts its second step from the first replay's released state (weights,
/// declared releases: ModelSpec::imposed), so an adaptive clip norm is the same in all of them; each
/// step's noise is measured against the clip norm the step reports. Only too little noise is a
/// violation: more than stated is private, and goes to NoiseCheck::notes. The data are split into several physical chunks, so noise
/// added per chunk (sqrt(#chunks) too much) shows. Catches: half or double noise, noise per chunk, noise
/// on the wrong scale (divided by sqrt(K), by the number of parameters, ...), noise that does not come
/// from the seeded stream (the same in every replay), no noise on some tensors, the first step's noise
/// reused. Cannot see: a divisor that equals the stated one at q = 1 (the realised batch size is then N),
/// noise of the right variance that is not Gaussian, noise that depends on the data (the record-replay check
/// sees that), or statistics a mechanism releases beside its update without declaring them.
///
/// On another model (NoiseCheckOptions::model: the recipe's, as privdiff check-mechanism runs it) the
/// same tests run on that model's tensors and records of its shape, its loss drawing the same noise in
/// every replay (ModelSpec::same_loss_draws), so that the clipped sum is again the same in all of them;
/// the every-direction test is then left out (2 d + 1 replays of a real model's d are out of reach).

#include <privdiff/check/mechanism_under_test.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

struct NoiseCheckOptions {
  std::int64_t replays = 40;              ///< R: runs with different seeds
  std::int64_t records = 12;              ///< N = B (q = 1)
  std::int64_t physical_batch_size = 3;   ///< chunks of the batch (several: noise per chunk shows)
  double noise_multiplier = 1.0;          ///< sigma the mechanism is configured with
  double max_grad_norm = 1.0;             ///< C: the mechanism's configured clipping norm
  double false_alarm = 1e-6;              ///< probability that a correct mechanism fails the check
  std::uint64_t seed = 1;                 ///< the first replay's seed (the next ones count up)
  /// Also the first step's noise in every direction (2 d + 1 one-step replays of d coordinates): a
  /// subspace without noise that crosses tensors. Skipped, with a note, above max_directions.
  bool every_direction = true;
  std::int64_t max_directions = 2000;
  /// The public data every replay's StageContext::public_data points to (records of the stand-in's
  /// 1x4x4 shape: StandInPublicData); null: none.
  const sdk::Dataset* public_data = nullptr;
  /// The model of every replay: by default the stand-in (ReplayModel without loss noise, records of
  /// `shape` 1x4x4). Set model.make (and shape to its image_shape) to check the noise on the recipe's
  /// own model, its tensors named by that model (public_data then holds records of its shape; a model
  /// that conditions on text gets them captioned, typical_captions).
  ModelSpec model;
  ImageShape shape{1, 4, 4};
  std::string label;  ///< the model's name in MechanismCheck's output, e.g. ", the recipe's model"
};

struct NoiseCheck {
  double configured_std = 0;   ///< sigma C / (q N), per coordinate of the update
  double measured_std = 0;     ///< pooled over coordinates and replays
  double low = 0, high = 0;    ///< the band measured / configured must fall in
  std::int64_t degrees_of_freedom = 0;
  std::string worst_tensor;    ///< the parameter tensor whose measured / stated std is furthest from 1
  double worst_tensor_ratio = 1;
  double second_step_std = 0;      ///< the second step's noise std, pooled
  double step_difference_std = 0;  ///< the std of the two steps' difference over sqrt(2) (independent: stated)
  /// Each declared release of the first step (DpSgdMechanism::release_statistic): its noise measured
  /// over the replays against the std it states.
  struct Release {
    std::string name;
    double measured_std = 0, stated_std = 0;
  };
  std::vector<Release> releases;
  /// The smallest noise variance over all directions, over the least isotropic noise leaves (>= 0.25: passed).
  double smallest_direction_ratio = 0;
  std::int64_t directions_checked = 0;  ///< d of that check (0: not run)
  std::string ledger;          ///< what the ledger recorded in one replay
  std::vector<std::string> violations;
  /// Findings that are no privacy violation: more noise than the ledger states (private; costs utility).
  std::vector<std::string> notes;
  bool passed() const { return violations.empty(); }
  double ratio() const { return configured_std > 0 ? measured_std / configured_std : 0.0; }
  PRIVDIFF_SDK_API std::string describe() const;
};

/// Runs the noise check (see the file comment) on the mechanism `make` builds.
PRIVDIFF_SDK_API NoiseCheck check_noise_calibration(const MechanismUnderTest& make, const NoiseCheckOptions& options);

/// The band [low, high] of sqrt(chi2_k / k) with two-sided probability `false_alarm` outside it.
PRIVDIFF_SDK_API std::pair<double, double> chi_ratio_band(std::int64_t degrees_of_freedom, double false_alarm);

}  // namespace privdiff::sdk::check
