#pragma once
/// @file
/// Mechanism: a (private) training strategy for one stage of a run.

#include <privdiff/components/component.hpp>
#include <privdiff/components/privacy_event.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

namespace privdiff::sdk {

class Collective;
class Model;
class Dataset;
class PrivacyLedger;

/// One line of progress, reported by a mechanism after each logical step.
struct StepReport {
  std::int64_t step = 0;         ///< logical steps done in this stage
  std::int64_t total_steps = 0;  ///< planned logical steps in this stage
  double loss = 0.0;
  std::int64_t examples = 0;     ///< examples processed in this step
  /// How the engine computes the steps (path, chunk, norm strategies; engine/engine_path.hpp), on a
  /// stage's first step only; written to metrics.jsonl as "engine". Never a function of the records.
  std::map<std::string, std::string> engine;
  /// The L2 sensitivity of this step's released gradient sum: the clip norm the step used (a DP-SGD
  /// step's; an adaptive clip norm C_t where the mechanism sets one), 0 when the step released none.
  /// What the noise check measures the step's noise against. Public: a function of earlier releases.
  double sensitivity = 0;
  /// The mechanism's own per-step figures (an adaptive clip norm, ...), written to metrics.jsonl as
  /// "mechanism". They are published, so each must be a function of what the stage has released (the
  /// record-replay check holds them to that): never of the records themselves.
  std::map<std::string, double> metrics;
  /// Directions in which a DP-SGD step's gradient carries a declared release's noise instead of its
  /// own (engine::DpSgdMechanism::state_noise_basis: GEP's embedding in a public subspace): in the
  /// orthonormal columns of `basis` ([d, k] float64 over the trained parameters' entries, module
  /// order) the noised sum's noise has std `noise_std` per coordinate, elsewhere the gradient's own.
  /// Public (from public data and released values). The noise check measures each part against its
  /// own std.
  struct NoiseBasis {
    std::string release;  ///< the declared release whose noise it is
    at::Tensor basis;
    double noise_std = 0;
  };
  std::vector<NoiseBasis> noise_bases;
};

/// A noisy statistic a stage releases (a histogram of votes or labels, a noisy sum), as the mechanism
/// reports it to the checks (StageContext::released_statistic).
struct ReleasedStatistic {
  std::string name;         ///< what it is, e.g. "votes, iteration 2"
  at::Tensor value;         ///< the released (noised) value
  double sensitivity = 0;   ///< the L2 sensitivity (add or remove one record) its ledger event assumes
  double noise_std = 0;     ///< the Gaussian noise's std per entry: the noise multiplier times the sensitivity
  /// True when its values on D and on D + x cannot be compared record for record: it depends on the
  /// stage's earlier releases (an iteration after the first), or on randomness drawn after the
  /// records' (a later Poisson subsample, whose stream one more record moves on). The replay then
  /// checks its structure and noise only.
  bool adaptive = false;
  /// The noise multiplier its ledger event states (DP-SGD's declared releases set it; 0: not stated,
  /// noise_std / sensitivity).
  double noise_multiplier = 0;
};

/// Adds a mechanism's mid-stage state (optimizer, EMA, generator states, ...) to a checkpoint.
using StateWriter = std::function<void(torch::serialize::OutputArchive&)>;

/// What the host gives a mechanism for one stage. References stay valid for the call.
struct StageContext {
  Model& model;
  const Dataset& data;
  /// Every privacy event the stage actually spends must be recorded here, once per logical step.
  PrivacyLedger& ledger;
  std::uint64_t seed = 0;
  /// Called after every logical step, once it is complete (optimizer stepped, ledger recorded):
  /// the host reports progress and, when a checkpoint is due, calls `save_state` to add the
  /// mechanism's state to it. The host may stop the run here by throwing; the mechanism just
  /// lets the exception pass.
  std::function<void(const StepReport&, const StateWriter& save_state)> step_done;
  /// When resuming this stage: the archive a previous `save_state` wrote after `resume_step`
  /// steps. The model's parameters are already restored; the mechanism restores the rest and
  /// continues with step resume_step + 1, so that the result equals an uninterrupted run.
  torch::serialize::InputArchive* resume = nullptr;
  std::int64_t resume_step = 0;
  /// The number of classes, from public configuration (the model's num_classes; 0 for an
  /// unconditional model). A mechanism that releases or counts anything per class uses this, never
  /// the data's labels: how many classes private data hold is itself private.
  std::int64_t num_classes = 0;
  /// The stage's position in the recipe: reproducible random streams are keyed by (seed, stage),
  /// so two stages never share a noise stream, even when given the same seed.
  std::int64_t stage_index = 0;
  /// For a stage that releases data (Mechanism::released_examples > 0): hands the host the
  /// released labelled images (float [N, C, H, W] in [-1, 1], int64 labels), once, after every
  /// privacy event of the release is recorded. The host saves them in the run directory as a
  /// dataset named after the stage, which later stages may train on.
  std::function<void(const at::Tensor& images, const at::Tensor& labels)> release = nullptr;
  /// The processes of a data-parallel run (null: one process). Only given to mechanisms whose
  /// supports_several_processes() is true. Every rank runs the stage with the same model, data and
  /// ledger; step_done is called on every rank (the host writes from rank 0 only).
  Collective* collective = nullptr;
  /// The public dataset the mechanism reads besides its own data (Mechanism::public_data_name), opened
  /// and checked public and disjoint from the private data by the host; null when it names none.
  const Dataset* public_data = nullptr;
  /// For the checks (the record-replay tests, privdiff check-mechanism; null in a run): a mechanism that
  /// releases noisy statistics rather than DP-SGD updates hands each one here once its event is on the
  /// ledger, with the sensitivity and noise that event assumes (check/statistic_replay.hpp).
  std::function<void(const ReleasedStatistic&)> released_statistic = nullptr;
  /// For the checks only (null in a run): when set, what a DP-SGD step's declared release
  /// (engine::DpSgdMechanism::release_statistic) returns in place of its own noised value. The
  /// record-replay check gives the run on D the release of the run on D + x this way, so that both
  /// runs start the next step from the same public state and any remaining difference is state that
  /// x reached without noise.
  std::function<at::Tensor(const ReleasedStatistic&)> replay_release = nullptr;
};

class PRIVDIFF_SDK_API Mechanism : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::mechanism;
  ~Mechanism() override;

  /// False for non-private training (public pretraining); such a mechanism must refuse private data.
  virtual bool is_private() const = 0;
  /// The privacy events this stage plans to spend on a dataset of `dataset_size` examples, as
  /// configured (with the current noise multiplier). Used to check the privacy target before
  /// training and to calibrate noise_multiplier = "auto".
  virtual PrivacyEvent planned_events(std::int64_t dataset_size) const = 0;
  /// True when the noise multiplier is "auto" and must be set by the host before run().
  virtual bool needs_calibration() const { return false; }
  /// The planned events for a given noise multiplier (what calibration searches over).
  virtual PrivacyEvent planned_events_with(double noise_multiplier, std::int64_t dataset_size) const;
  /// Called by the host with the calibrated noise multiplier (sigma / max_grad_norm).
  virtual void set_noise_multiplier(double noise_multiplier);
  /// The noise multiplier (noise std / sensitivity) of this stage's Gaussian steps as set, configured or
  /// calibrated: what the host keeps per stage (a resumed stage must have the same). None (the
  /// default) for a non-private stage or one without a single noise multiplier.
  virtual std::optional<double> noise_multiplier() const { return std::nullopt; }
  /// Marks the parameters this stage trains (requires_grad true) and freezes the rest. Called by
  /// the host before run() (and by `privdiff params`). Default: every parameter trains.
  virtual void select_trainable(Model& model) const;
  /// The name of a public dataset ([data.NAME]) the stage reads besides its own data: PrivImage's
  /// semantic query trains its classifier on it and releases a selection of it. The host opens it,
  /// refuses it unless it is public and shares no record with the private data, lists it on the
  /// model card's public data, and passes it as StageContext::public_data. Default: none.
  virtual std::optional<std::string> public_data_name() const { return std::nullopt; }
  /// Checks the public dataset public_data_name() names against the stage's configuration (say, that
  /// it has at least as many classes as a key asks to select), so that `privdiff validate` and a run's
  /// pre-flight refuse it before any run directory is made or private data is read. Called by the
  /// host once that dataset is open and found public and disjoint from the private data, before run()
  /// (by validate, run and check-mechanism alike); it sees public data only. Throw
  /// sdk::KeyValueError(config.path() + ".KEY", problem) for a key's value the data cannot serve (the
  /// host reports it at the recipe's file:line, exit 2); any other std::invalid_argument is reported
  /// with the stage and the dataset named. Default: accepts any.
  virtual void check_public_data(const Dataset& public_data) const { (void)public_data; }
  /// How many labelled images the stage releases from a dataset of `dataset_size` examples in
  /// `num_classes` classes (StageContext::num_classes: public) (0: it trains, releases nothing). A release is differentially private
  /// (its events are in planned_events), so non-private stages may train on it at no further cost.
  virtual std::int64_t released_examples(std::int64_t dataset_size, std::int64_t num_classes) const { return 0; }
  /// True when run() can train as one rank of several processes (StageContext::collective): the
  /// privacy events of a logical step are then spent once across all ranks, not once per rank.
  /// Default false: the host refuses `privdiff run --nproc N` (N > 1) for such a stage.
  virtual bool supports_several_processes() const { return false; }
  /// Trains the model for this stage (or its remainder, when context.resume is set; a mechanism
  /// that cannot resume throws std::runtime_error saying so).
  virtual void run(StageContext& context) = 0;
};

}  // namespace privdiff::sdk
