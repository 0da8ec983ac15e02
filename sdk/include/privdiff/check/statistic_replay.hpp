#pragma once
/// @file
/// Record replay of a stage that releases noisy statistics rather than DP-SGD updates: semantic_query's
/// label histogram, private_evolution's vote histograms, or any plugin's that reports its releases
/// through StageContext::released_statistic. The stage runs on D and on D ∪ {x} (x appended last) for
/// extreme and typical x with the same seeds, public randomness and noise stream, so the noise cancels
/// and what remains is x's contribution. Checked, for every x:
///   1. sensitivity: each statistic that does not depend on earlier releases moves by at most the L2
///      sensitivity the mechanism declares for it;
///   2. structure: the same statistics (names, shapes, sensitivities, noise), the same ledger, which is
///      the plan, and released data of the same shape with the same labels;
///   3. noise: each statistic's noise std over its sensitivity is the stage's noise multiplier, and on D
///      two noise seeds release values whose difference has the declared spread (chi-square band,
///      two-sided false-alarm probability `false_alarm`);
///   4. that there is something to check: a private stage that reports no statistic fails.
/// An adaptive statistic (an iteration after the first, or a later Poisson subsample's) starts from
/// histories or draws that differ with x; its values are not compared, only its structure. Run a
/// stage with one iteration to check every iteration's code. What a replay cannot see: a statistic
/// released without being reported, or one reported but not the one used
/// (docs/checking-a-mechanism.md).

#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_report.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

/// What one run of the stage left behind.
struct StatisticStageRun {
  std::vector<ReleasedStatistic> statistics;  ///< as reported, in order
  std::string ledger;                         ///< the events it recorded
  std::string plan;                           ///< planned_events(N)
  std::optional<double> noise_multiplier;     ///< the mechanism's
  at::Tensor released_images, released_labels;  ///< what it handed StageContext::release (undefined: nothing)
};

/// Runs the stage on `data` with the noise stream of `noise_seed` and otherwise the same seeds every call.
using StatisticStage = std::function<StatisticStageRun(const Dataset& data, std::uint64_t noise_seed)>;

/// Builds the mechanism under test with reproducible noise from `noise_seed` (secure_noise off).
using StatisticMechanism = std::function<std::unique_ptr<Mechanism>(std::uint64_t noise_seed)>;

struct StatisticReplayOptions {
  std::uint64_t noise_seed = 1;  ///< of the replays (the noise check adds a second)
  double relative_slack = 1e-9;  ///< for rounding, on each bound
  double false_alarm = 1e-6;     ///< of the noise check
};

/// Checks 1-4 of the stage on D and D ∪ {x} for each neighbour.
PRIVDIFF_SDK_API Report check_statistic_releases(const StatisticStage& stage, const ReplayData& d,
                                                 const std::vector<Neighbour>& neighbours,
                                                 const StatisticReplayOptions& options = {});

/// The mechanism `make` builds, run as the host runs a stage (a fresh ledger; the release and the
/// reported statistics captured) with `model`, `public_data` (may be null), public `classes` and the
/// run's `seed`. The model and public data must outlive the returned function.
PRIVDIFF_SDK_API StatisticStage statistic_stage(StatisticMechanism make, Model& model, const Dataset* public_data,
                                                std::int64_t classes, std::uint64_t seed);

}  // namespace privdiff::sdk::check
