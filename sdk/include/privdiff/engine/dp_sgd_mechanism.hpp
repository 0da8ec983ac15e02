#pragma once
/// @file
/// DpSgdMechanism: the DP-SGD training loop as a reusable Mechanism. The `dpsgd`, `nonprivate` and
/// `dpdm` plugins are this class with different schemas; out-of-tree mechanisms can derive from it.
///
/// One logical step: Poisson-sample a batch with rate q = batch_size / N; split it into physical
/// chunks (shared out among the ranks of a data-parallel run); per chunk, per-example gradients of the model's K-averaged training loss (vectorised),
/// clipped and summed; once per logical step, Gaussian noise of std sigma * C and division by the
/// expected batch size q N; the mechanism's own releases of the batch (after_step_gradient, declared
/// by step_releases); the optimizer step; the EMA update; one entry in the ledger for the batch,
/// PoissonSampled(q, Gaussian(sigma)), or PoissonSampled(q, Composed([Gaussian(sigma), ...])) with the
/// declared releases. Non-private mode trains on the plain mean loss and records nothing.
/// The hooks' contracts, with worked examples: docs/writing-a-mechanism.md.
///
/// Batches and noise come from RandomStreams keyed by the OS CSPRNG (secure_noise = true, the
/// default), or by (seed, stage index) when reproducibility is opted into — then the ledger gets
/// reproducible_noise_caveat().

#include <privdiff/components/mechanism.hpp>
#include <privdiff/data/augment.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/engine/precision.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

class GaussianNoise;
class PrivateGradient;

struct DpSgdOptions {
  bool is_private = true;
  std::int64_t batch_size = 256;           ///< expected logical batch size B (q = B / N)
  std::optional<double> epochs;            ///< training length in epochs (steps = ceil(epochs N / B)), or
  std::optional<std::int64_t> steps;       ///< in logical steps (exactly one of the two)
  double max_grad_norm = 1.0;              ///< C
  std::optional<double> noise_multiplier;  ///< sigma (noise std / C); empty = "auto", set by the host
  ClipMode clipping = ClipMode::flat;
  std::int64_t physical_batch_size = 0;    ///< 0: the whole logical batch at once (or the chunk the engine's calibration chose)
  EnginePath engine_path = EnginePath::automatic;  ///< vectorised / micro-batch, or chosen per shape (engine_path.hpp)
  /// The vectorised path's backward passes (fast_gradient_clipping.hpp): two hold no layer output's
  /// gradient, for a second backward's time.
  ClipPasses clip_passes = ClipPasses::one;
  Precision precision = Precision::float32;  ///< of the forward and backward (precision.hpp)
  std::string optimizer = "adam";          ///< "adam" or "sgd"
  double lr = 3e-4, momentum = 0.9, weight_decay = 0.0;
  double ema = 0.999;                      ///< EMA rate of the weights; 0 disables. The model ends with the EMA weights.
  bool secure_noise = true;                ///< noise and sampling keyed by the OS CSPRNG; false: by the seed
  std::optional<std::uint64_t> seed;       ///< default: the run's seed (per stage)
  std::int64_t noise_multiplicity = 1;     ///< K
  ParameterSelection trainable;            ///< which parameters the stage trains (the rest stay frozen)
  data::RandAugmentOptions augment;        ///< RandAugment on each batch (ops_per_image 0: none)
};

/// The caveat a private stage with secure_noise = false adds to the ledger.
PRIVDIFF_SDK_API const std::string& reproducible_noise_caveat();

/// The recipe keys of a DP-SGD-style mechanism; `with_noise_multiplicity` adds K, `noise_multiplicity`,
/// with DPDM's default of 32: 32 forward and backward passes per example, about 32 times a K = 1 step's
/// time and activation memory. A plugin that wants another default passes false and adds its own key.
PRIVDIFF_SDK_API Schema dp_sgd_schema(bool is_private, bool with_noise_multiplicity);
/// Reads a config validated against dp_sgd_schema. Throws std::invalid_argument for combinations a
/// schema cannot express (epochs and steps both or neither, a seed with secure_noise, ...).
PRIVDIFF_SDK_API DpSgdOptions dp_sgd_options(const Config& config, bool is_private);

class PRIVDIFF_SDK_API DpSgdMechanism : public Mechanism {
 public:
  explicit DpSgdMechanism(DpSgdOptions options);
  ~DpSgdMechanism() override;

  bool is_private() const override { return options_.is_private; }
  PrivacyEvent planned_events(std::int64_t dataset_size) const override;
  bool needs_calibration() const override { return options_.is_private && !options_.noise_multiplier; }
  PrivacyEvent planned_events_with(double noise_multiplier, std::int64_t dataset_size) const override;
  void set_noise_multiplier(double noise_multiplier) override;
  std::optional<double> noise_multiplier() const override {
    return options_.is_private ? options_.noise_multiplier : std::nullopt;
  }
  void select_trainable(Model& model) const override;
  void run(StageContext& context) override;
  /// Data parallel (StageContext::collective): rank 0 samples the logical batch and shares it; its
  /// physical chunks go round robin to the ranks; the clipped sums meet in one all-reduce, with the
  /// noise added once, by rank 0.
  bool supports_several_processes() const override { return true; }

  /// A statistic of a step's Poisson batch that the mechanism releases besides the noised gradient
  /// (adaptive clipping's count of unclipped examples, ...): its name, its L2 sensitivity (add or
  /// remove one record) and the multiplier of its Gaussian noise (std = noise_multiplier * sensitivity,
  /// times the gradient's sigma when relative_to_sigma).
  struct StepRelease {
    std::string name;
    double sensitivity = 1;
    double noise_multiplier = 1;
    /// true: noise_multiplier is a multiple of the gradient's sigma (the release's own multiplier is
    /// noise_multiplier * sigma), so that calibrating sigma ("auto") scales this release's noise too
    /// (GEP's embedding and residual); false: a fixed multiplier (adaptive clipping's count).
    bool relative_to_sigma = false;
  };

  const DpSgdOptions& options() const { return options_; }
  /// Logical steps for a dataset of n examples.
  std::int64_t steps_for(std::int64_t dataset_size) const;

 protected:
  /// The per-example clip rule (docs/writing-a-mechanism.md):
  /// an example's factor from its squared gradient norms per parameter tensor ([1, P] float64,
  /// finite, >= 0; the engine calls it example by example, so a factor can depend on its own example
  /// only), as [1] (or [1, P] with per-layer clipping). The base returns an undefined tensor: the
  /// standard rule min(1, C / (||g|| + 1e-6)). Override it for a new rule (automatic clipping:
  /// C / (||g|| + gamma)); every engine path, ghost norms included, and the engine's timing of its
  /// paths then run it, and engine::clip_factors(..., rule) holds its result to C, so the
  /// sensitivity stays what the ledger says.
  virtual at::Tensor clip_factors(const at::Tensor& squared_norms) const;
  /// The two privacy-critical pieces of a private step, for mechanisms that change how gradients
  /// are clipped or noised beyond the clip rule (and for the planted-bug engines that audits are
  /// tested against): what these do is not held to anything; `privdiff check-mechanism` measures it.
  /// One physical chunk: the sum of its `examples` clipped per-example gradients (the engine's
  /// path with the options' C and clip mode and clip_factors; `loss` gives K rows per example).
  virtual ClippedSum clipped_chunk_sum(torch::nn::Module& module, const RowLoss& loss, std::int64_t examples);
  /// Once per logical step: Gaussian noise of std sigma * C on the sum, division by the expected
  /// batch size q N, the result in each parameter's .grad.
  virtual void noise_step_gradient(PrivateGradient& gradient, double expected_batch_size, GaussianNoise& noise);

  /// The releases every private logical step makes besides its gradient; the engine calls it when it
  /// plans (calibration included) and at the start of run(), so it must depend on the options only.
  /// planned_events and the ledger then state each step as ONE event on its batch,
  /// PoissonSampled(q, Composed([Gaussian(sigma), Gaussian(sigma_1), ...])): two releases of one
  /// Poisson batch are one subsampled mechanism (recorded as two PoissonSampled events they would
  /// under-count epsilon). Default: none.
  virtual std::vector<StepRelease> step_releases() const { return {}; }
  /// Once per private logical step, on every rank, after the step's noised gradient is in each
  /// parameter's .grad and before the optimizer step and the ledger entry. `norms`: this rank's
  /// per-example gradient norms before clipping ([b_rank] float64, batch order; what clip_factors
  /// saw). Here the mechanism makes each of step_releases() exactly once with release_statistic, and
  /// may set the next step's clip norm (set_clip_norm) from what it released. Anything it keeps for
  /// the next step must be a function of released values only: the record-replay check replays the
  /// next steps from the same released state on D and D + x and flags any other dependence on x.
  /// The model is in training mode; no gradient is recorded. Default: nothing.
  virtual void after_step_gradient(const at::Tensor& norms);
  /// Releases the declared statistic `name` of this step: `value` (this rank's part; summed over the
  /// ranks) plus Gaussian noise of std noise_multiplier * sensitivity from the stage's noise stream
  /// (drawn once, by rank 0). Returns the noised value, the same on every rank; it is also reported
  /// to the checks (StageContext::released_statistic). Only inside after_step_gradient, once per
  /// declared release and step; anything else throws std::logic_error.
  at::Tensor release_statistic(const std::string& name, const at::Tensor& value);
  /// States that this step's gradient (in .grad) carries, in the orthonormal columns of `basis`
  /// ([d, k]; d the entries of the trained parameters, module order), the noise of the declared
  /// release `name` made this step (its values are the gradient's coordinates in those columns,
  /// noised at the release's multiplier) instead of the gradient's own: GEP's embedding in a public
  /// subspace. Only inside after_step_gradient, after that release; the columns must be orthonormal
  /// (std::logic_error otherwise). Reported in StepReport::noise_bases: the noise check measures the
  /// noise in those directions against the release's std and elsewhere against the gradient's.
  void state_noise_basis(const std::string& name, const at::Tensor& basis);
  /// The clip norm of the steps from the next one on (adaptive clipping); the gradient's noise std
  /// is noise_multiplier * that norm, so the privacy cost of a step does not change. Must be > 0 and
  /// finite (std::invalid_argument); only inside after_step_gradient (std::logic_error elsewhere).
  /// Starts as max_grad_norm; restored on resume.
  void set_clip_norm(double clip_norm);
  double clip_norm() const { return clip_norm_; }
  /// The mechanism's own state for checkpoints (read back on resume, after the engine's own): what
  /// it keeps across steps beyond the clip norm. Called from the host's step_done when a checkpoint
  /// is due. Defaults: nothing.
  virtual void save_mechanism_state(torch::serialize::OutputArchive& archive) const;
  virtual void load_mechanism_state(torch::serialize::InputArchive& archive);
  /// Figures for this step's metrics.jsonl line ("mechanism"), asked after after_step_gradient: they
  /// are published, so each must be a function of released values (the checks compare them).
  /// Default: the clip norm, when the mechanism has changed it.
  virtual std::map<std::string, double> step_metrics() const;

 private:
  /// Throws std::invalid_argument for an empty dataset or a batch_size larger than it (q > 1).
  void check_dataset_size(std::int64_t dataset_size) const;
  DpSgdOptions options_;
  ClipRule clip_rule() const;  // clip_factors as the engine's functions take it
  EnginePlan engine_plan_;  // set at the start of run(), for clipped_chunk_sum
  NormPlanner planner_;
  double clip_norm_ = 0;  // C_t; max_grad_norm until set_clip_norm
  struct StepReleases;
  StepReleases* releasing_ = nullptr;  // set during after_step_gradient
  std::vector<StepReport::NoiseBasis> stated_bases_;  // this step's state_noise_basis, for its report
  /// The planned event of one logical step with gradient noise multiplier sigma.
  PrivacyEvent step_event(double sigma, double q) const;
  /// Runs after_step_gradient for `step` (from 1) with release_statistic enabled; throws when a
  /// declared release was not made.
  void make_step_releases(StageContext& context, GaussianNoise& noise, std::int64_t step, const at::Tensor& norms,
                          const std::vector<StepRelease>& declared);
  void save_own_state(torch::serialize::OutputArchive& state) const;  // the clip norm, save_mechanism_state
  void load_own_state(torch::serialize::InputArchive& state);
};

}  // namespace privdiff::sdk::engine
