#include <privdiff/components/model.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/multi_tensor_adam.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/precision.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/engine/seeds.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/privacy/ledger.hpp>

#include "chunk_trainer.hpp"
#include "step_releases.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace privdiff::sdk::engine {

const std::string& reproducible_noise_caveat() {
  static const std::string text =
      "reproducible noise (secure_noise = false): the noise and the batches are a function of the seed in "
      "recipe.toml; the guarantee holds only while that seed stays secret";
  return text;
}

namespace {
// The longest stage: a billion logical steps is weeks even at a thousand steps a second (DPDM's
// paper-size run is 4,394). A bound keeps a typo (steps = 1e12) from starting a run that never ends,
// and epochs * N / B within int64.
constexpr std::int64_t max_stage_steps = 1'000'000'000;
constexpr double max_epochs = 1e6;
}  // namespace

Schema dp_sgd_schema(bool is_private, bool with_noise_multiplicity) {
  Schema s;
  s.add(Key::integer("batch_size").at_least(1).doc("expected (Poisson) logical batch size B; q = B / N"))
      .add(Key::number("epochs").greater_than(0).at_most(max_epochs).optional()
               .doc("training length in epochs (steps = ceil(epochs N / B), at most 1e9)"))
      .add(Key::integer("steps").at_least(1).at_most(static_cast<double>(max_stage_steps)).optional()
               .doc("training length in logical steps (instead of epochs)"));
  if (is_private) {
    s.add(Key::number("max_grad_norm").greater_than(0).defaults(1.0).doc("per-example clipping norm C"))
        .add(Key::number("noise_multiplier").greater_than(0).or_keyword("auto").defaults("auto")
                 .doc("noise std / C; \"auto\" = the smallest that meets [privacy] epsilon"))
        .add(Key::string("clipping").one_of({"flat", "per_layer"}).defaults("flat")
                 .doc("flat: whole gradient norm <= C; per_layer: each tensor <= C / sqrt(#tensors)"))
        .add(Key::string("engine_path").one_of({"auto", "vectorised", "micro_batch"}).defaults("auto")
                 .doc("how a chunk's clipped gradient sum is computed (both exact): auto = the faster for this shape "
                      "and device, with the chunk size when physical_batch_size = 0, measured on synthetic chunks "
                      "before the first step and recorded in metrics.jsonl (with secure_noise = false, whose runs "
                      "repeat bit for bit, the shapes decide instead: vectorised, configured chunks; "
                      "docs/engine.md#how-the-engine-chooses-its-path)"))
        .add(Key::string("clip_passes").one_of({"one", "two"}).defaults("one")
                 .doc("the vectorised path's backward passes (the same clipped sums): one keeps every layer's output "
                      "gradient for the chunk until the norms are taken; two takes the norms inside the backward and "
                      "the sums in a checked replay of it, holding about a non-private step's memory for a second "
                      "backward's time (docs/engine.md#memory-one-or-two-backward-passes)"))
        .add(Key::boolean("secure_noise").defaults(true)
                 .doc("true: noise and batches from a ChaCha20 stream keyed by the OS CSPRNG; false: keyed by the "
                      "seed (reproducible, and the privacy reports carry a caveat: the guarantee holds only while "
                      "the seed stays secret)"));
  }
  if (with_noise_multiplicity) {
    s.add(Key::integer("noise_multiplicity").at_least(1).defaults(32)
              .doc("K noised copies of each example, averaged before per-example clipping (default 32, DPDM's: "
                   "each example costs K forward and backward passes; 1 for plain DP-SGD's cost)"));
  }
  s.add(Key::string("precision").one_of({"float32", "tf32", "bf16"}).defaults("float32")
            .doc("the forward and backward's precision (GPU): tf32 tensor-core products, or bf16 autocast; norms, "
                 "clipping, noise and the optimizer stay in float32, so the privacy analysis is unchanged"))
      .add(Key::integer("physical_batch_size").at_least(0).defaults(0)
            .doc("examples per forward/backward (memory bound); 0 = the whole logical batch"))
      .add(Key::string("optimizer").one_of({"adam", "adamw", "sgd"}).defaults("adam")
               .doc("optimizer (adamw: Adam with decoupled weight decay, DP-LDM's)"))
      .add(Key::number("lr").greater_than(0).defaults(3e-4).doc("learning rate"))
      .add(Key::number("momentum").at_least(0).less_than(1).defaults(0.9).doc("SGD momentum"))
      .add(Key::number("weight_decay").at_least(0).defaults(0.0)
               .doc("weight decay: L2 for adam and sgd, decoupled for adamw (PyTorch's AdamW default: 0.01)"))
      .add(Key::number("ema").at_least(0).less_than(1).defaults(0.999)
               .doc("EMA rate of the weights (0 = off); the model ends the stage with the EMA weights"))
      .add(Key::integer("seed").at_least(0).optional()
               .doc("seed of this stage's randomness; default: from [run] seed. Seeds the noise and batches only "
                    "with secure_noise = false"));
  s.add(Key::integer("augment_ops").at_least(0).defaults(0)
            .doc("RandAugment ops per training image (0 = none; DP-FETA's warm-up: 2); per example, so it keeps "
                 "the privacy analysis"))
      .add(Key::integer("augment_min_magnitude").at_least(0).at_most(30).defaults(1).doc("RandAugment level, lowest (of 30)"))
      .add(Key::integer("augment_max_magnitude").at_least(0).at_most(30).defaults(3).doc("RandAugment level, highest"));
  add_parameter_selection_keys(s);
  return s;
}

DpSgdOptions dp_sgd_options(const Config& c, bool is_private) {
  DpSgdOptions o;
  o.is_private = is_private;
  o.batch_size = c.get_int("batch_size");
  if (c.has("epochs") == c.has("steps")) {
    throw std::invalid_argument(c.path() + ": give exactly one of epochs or steps");
  }
  if (c.has("epochs")) o.epochs = c.get_double("epochs");
  if (c.has("steps")) o.steps = c.get_int("steps");
  if (is_private) {
    o.max_grad_norm = c.get_double("max_grad_norm");
    if (!c.is_keyword("noise_multiplier", "auto")) o.noise_multiplier = c.get_double("noise_multiplier");
    o.clipping = clip_mode_from_string(c.get_string("clipping"));
    o.secure_noise = c.get_bool("secure_noise");
    o.engine_path = engine_path_from_string(c.get_string("engine_path"));
    o.clip_passes = clip_passes_from_string(c.get_string("clip_passes"));
  } else {
    o.secure_noise = false;  // public data: nothing to keep secret, batches follow the seed
  }
  if (c.has("noise_multiplicity")) o.noise_multiplicity = c.get_int("noise_multiplicity");
  o.physical_batch_size = c.get_int("physical_batch_size");
  o.precision = precision_from_string(c.get_string("precision"));
  o.optimizer = c.get_string("optimizer");
  o.lr = c.get_double("lr");
  o.momentum = c.get_double("momentum");
  o.weight_decay = c.get_double("weight_decay");
  o.ema = c.get_double("ema");
  o.trainable = parameter_selection(c);
  o.augment.ops_per_image = c.get_int("augment_ops");
  o.augment.min_magnitude = c.get_int("augment_min_magnitude");
  o.augment.max_magnitude = c.get_int("augment_max_magnitude");
  if (o.augment.min_magnitude > o.augment.max_magnitude) {
    throw KeyValueError(c.path() + ".augment_min_magnitude", "larger than augment_max_magnitude");
  }
  if (c.has("seed")) {
    if (o.secure_noise) {
      throw KeyValueError(c.path() + ".seed", "a stage seed would make the noise reproducible, but "
                                  "secure_noise = true draws it from the OS CSPRNG; set secure_noise = false to opt "
                                  "into reproducible noise (the privacy reports then carry a caveat)");
    }
    o.seed = static_cast<std::uint64_t>(c.get_int("seed"));
  }
  return o;
}

DpSgdMechanism::DpSgdMechanism(DpSgdOptions options) : options_(std::move(options)) {
  if (options_.epochs.has_value() == options_.steps.has_value()) {
    throw std::invalid_argument("give exactly one of epochs or steps");
  }
  if (options_.secure_noise && options_.seed) throw std::invalid_argument("secure_noise = true refuses a seed");
  if (options_.batch_size < 1 || options_.noise_multiplicity < 1) throw std::invalid_argument("bad batch size or K");
}

DpSgdMechanism::~DpSgdMechanism() = default;

std::int64_t DpSgdMechanism::steps_for(std::int64_t n) const {
  if (options_.steps) return *options_.steps;
  return static_cast<std::int64_t>(std::ceil(*options_.epochs * static_cast<double>(n) / options_.batch_size - 1e-9));
}

namespace {

double sampling_rate(std::int64_t batch_size, std::int64_t n) {
  return std::min(1.0, static_cast<double>(batch_size) / static_cast<double>(n));
}

// A non-private mechanism never trains on private data, and a private one must have its sigma by
// now (the host calibrates "auto" before the run).
void check_runnable(const DpSgdOptions& options, const Dataset& data) {
  if (!options.is_private && !data.is_public()) {
    throw std::runtime_error("a non-private mechanism refuses private data: " + data.name() +
                             " is not marked public ([data] public = true)");
  }
  if (options.is_private && !options.noise_multiplier) {
    throw std::logic_error("noise_multiplier is \"auto\" and has not been calibrated");
  }
}

// Batches and noise: secret streams by default (fresh OS randomness, also on resume: the batches
// already drawn must stay secret for subsampling amplification, so a checkpoint never holds
// them); reproducible streams keyed by (seed, stage) only when opted into.
RandomStream stage_stream(bool secret, std::uint64_t seed, std::uint64_t stage, StreamPurpose purpose) {
  return secret ? RandomStream::secret(purpose) : RandomStream::reproducible(seed, stage, purpose);
}

// The loss's own randomness (diffusion noise levels, augmentation) is not part of the privacy
// argument (the guarantee holds for every fixed value of it). In secret mode its seed is fresh OS
// randomness too, never saved: the chunks' sizes follow the secret batches.
std::uint64_t loss_seed_for(bool secret, std::uint64_t seed, std::uint64_t stage) {
  std::uint64_t loss_seed = derive_seed(seed + stage * 0x9E3779B97F4A7C15ULL, SeedStream::loss);
  if (secret) {
    os_random_bytes(&loss_seed, sizeof loss_seed);
    loss_seed >>= 1;  // < 2^63, as derive_seed's: torch handles seeds as signed
  }
  return loss_seed;
}

// Every rank starts from rank 0's weights, whatever initialised them.
void broadcast_weights(Collective& ranks, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    at::Tensor t = p.detach();
    ranks.broadcast(t, 0);
  }
  for (auto& b : module.buffers()) ranks.broadcast(b, 0);
}

// Over the trainable parameters only: frozen ones get no optimizer state. Adam's step in multi-tensor
// operations: on a GPU, LibTorch's per-tensor step was a sixth of a private step.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const DpSgdOptions& o, const std::vector<at::Tensor>& params) {
  if (o.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  }
  if (o.optimizer == "adamw") {
    return std::make_unique<MultiTensorAdamW>(params, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  }
  return std::make_unique<MultiTensorAdam>(params, torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
}

// The EMA of the weights (empty when off): started from the weights, updated after each optimizer
// step, and what the model ends the stage with.
std::vector<at::Tensor> start_ema(const std::vector<at::Tensor>& params, double rate) {
  std::vector<at::Tensor> ema;
  if (rate > 0) {
    for (const auto& p : params) ema.push_back(p.detach().clone());
  }
  return ema;
}
void load_ema(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& ema) {
  if (ema.empty()) return;
  torch::NoGradGuard no_grad;
  for (std::size_t j = 0; j < params.size(); ++j) params[j].copy_(ema[j]);
}

// What a checkpoint of the stage holds so that a resumed run equals an uninterrupted one: the
// optimizer, the EMA and, for reproducible streams only, the streams' states (secret streams never
// reach the disk).
struct ResumableState {
  torch::optim::Optimizer& optimizer;
  std::vector<at::Tensor>& ema;
  PoissonSampler& sampler;
  GaussianNoise& noise;
  bool secret;

  void load(torch::serialize::InputArchive& state) const {
    torch::serialize::InputArchive optimizer_state;
    state.read("optimizer", optimizer_state);
    optimizer.load(optimizer_state);
    for (std::size_t j = 0; j < ema.size(); ++j) {
      at::Tensor saved;
      state.read("ema." + std::to_string(j), saved);
      ema[j].copy_(saved);
    }
    if (!secret) {
      at::Tensor sampler_state, noise_state;
      state.read("sampler_state", sampler_state);
      state.read("noise_state", noise_state);
      sampler.set_state(sampler_state);
      noise.set_state(noise_state);
    }
  }
  void save(torch::serialize::OutputArchive& state) const {
    torch::serialize::OutputArchive optimizer_state(state.compilation_unit());
    optimizer.save(optimizer_state);
    state.write("optimizer", optimizer_state);
    for (std::size_t j = 0; j < ema.size(); ++j) state.write("ema." + std::to_string(j), ema[j]);
    if (!secret) {
      state.write("sampler_state", sampler.state());
      state.write("noise_state", noise.state());
    }
  }
};

// One Poisson draw per logical step for the whole run (rank 0's, shared): every example is in
// the batch with probability q exactly once, as the accountant assumes.
at::Tensor draw_batch(Collective* ranks, PoissonSampler& sampler) {
  if (!ranks) return sampler.next();
  return broadcast_from_rank0(*ranks, ranks->rank() == 0 ? sampler.next() : at::Tensor());
}

// Non-private data parallel: the plain gradients summed over the ranks (a private step's sums
// meet inside PrivateGradient).
void all_reduce_gradients(Collective& ranks, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  ranks.all_reduce_sum(grads);
  for (std::size_t j = 0; j < params.size(); ++j) params[j].mutable_grad() = grads[j];
}

// The step's loss over every rank's chunks (progress and metrics only).
double all_reduce_loss(Collective& ranks, double loss_sum, c10::Device device) {
  std::vector<at::Tensor> total{at::full({1}, loss_sum, at::TensorOptions(at::kDouble).device(device))};
  ranks.all_reduce_sum(total);
  return total[0].item<double>();
}

}  // namespace

void DpSgdMechanism::check_dataset_size(std::int64_t n) const {
  if (n < 1) throw std::invalid_argument("the dataset is empty");
  if (options_.batch_size > n) {
    throw std::invalid_argument("batch_size " + std::to_string(options_.batch_size) + " is larger than the dataset (" +
                                std::to_string(n) + " examples): the sampling rate q = batch_size / N must be at "
                                "most 1; use batch_size <= " + std::to_string(n));
  }
  const double steps =
      options_.epochs ? std::ceil(*options_.epochs * static_cast<double>(n) / options_.batch_size - 1e-9) : 0.0;
  if (steps > static_cast<double>(max_stage_steps)) {  // `steps` itself: the schema bounds it
    std::ostringstream what;
    what << "epochs = " << *options_.epochs << " of " << n << " examples at batch_size " << options_.batch_size
         << " make " << steps << " steps, more than the " << max_stage_steps << " a stage may take; give fewer epochs";
    throw std::invalid_argument(what.str());
  }
}

PrivacyEvent DpSgdMechanism::planned_events_with(double sigma, std::int64_t n) const {
  check_dataset_size(n);
  if (!options_.is_private) return PrivacyEvent::no_op();
  return PrivacyEvent::self_composed(step_event(sigma, sampling_rate(options_.batch_size, n)), steps_for(n));
}

PrivacyEvent DpSgdMechanism::planned_events(std::int64_t n) const {
  if (!options_.is_private) return PrivacyEvent::no_op();
  if (!options_.noise_multiplier) throw std::logic_error("noise_multiplier is \"auto\" and has not been calibrated");
  return planned_events_with(*options_.noise_multiplier, n);
}

void DpSgdMechanism::set_noise_multiplier(double sigma) {
  if (!(sigma > 0)) throw std::invalid_argument("noise multiplier must be > 0");
  options_.noise_multiplier = sigma;
}

void DpSgdMechanism::select_trainable(Model& model) const { apply_parameter_selection(model, options_.trainable); }

at::Tensor DpSgdMechanism::clip_factors(const at::Tensor&) const {
  return {};  // undefined: the engine's standard rule, vectorised over the chunk
}

ClipRule DpSgdMechanism::clip_rule() const {
  return [this](const at::Tensor& squared_norms) { return clip_factors(squared_norms); };
}

ClippedSum DpSgdMechanism::clipped_chunk_sum(torch::nn::Module& module, const RowLoss& loss, std::int64_t examples) {
  return clipped_sum_along(engine_plan_, module, loss, examples, options_.noise_multiplicity, clip_norm_,
                           options_.clipping, planner_, clip_rule());
}

void DpSgdMechanism::noise_step_gradient(PrivateGradient& gradient, double expected_batch_size, GaussianNoise& noise) {
  gradient.finish_into_grads(*options_.noise_multiplier, expected_batch_size, noise);
}

namespace {
// A second PoissonSampled event of the step's rate, recorded by a derived mechanism around the engine's
// (in a hook, or a step_done it wrapped): another release of the step's batch, which two events
// under-count. Refused; the events of the next step start here.
void refuse_separately_sampled(PrivacyLedger& ledger, std::int64_t steps_done) {
  if (const std::string what = ledger.separately_sampled(); !what.empty()) {
    throw std::logic_error("step " + std::to_string(steps_done) + ": " + what);
  }
  ledger.begin_step();
}
}  // namespace

void DpSgdMechanism::run(StageContext& context) {
  using detail::ChunkTrainer;
  const Dataset& data = context.data;
  const std::int64_t n = data.size();
  check_runnable(options_, data);
  check_dataset_size(n);
  const double q = sampling_rate(options_.batch_size, n);
  const std::int64_t total_steps = steps_for(n);
  const std::uint64_t seed = options_.seed.value_or(context.seed);
  const auto stage = static_cast<std::uint64_t>(context.stage_index);
  const bool secret = options_.is_private && options_.secure_noise;
  PoissonSampler sampler(n, q, stage_stream(secret, seed, stage, StreamPurpose::sampling));
  GaussianNoise noise(stage_stream(secret, seed, stage, StreamPurpose::noise));
  if (options_.is_private && !secret) context.ledger.add_caveat(reproducible_noise_caveat());
  const std::uint64_t loss_seed = loss_seed_for(secret, seed, stage);
  // A data-parallel run: rank 0 samples and noises, every rank trains its share of the chunks.
  Collective* ranks = context.collective;

  Model& model = context.model;
  select_trainable(model);  // frozen parameters: no per-example gradients, no optimizer state, no EMA
  model.module().train();
  const std::vector<at::Tensor> params = trainable_parameters(model.module());
  if (params.empty()) throw std::runtime_error("the model has no trainable parameters");
  if (ranks) broadcast_weights(*ranks, model.module());
  const std::unique_ptr<torch::optim::Optimizer> optimizer = make_optimizer(options_, params);
  std::vector<at::Tensor> ema = start_ema(params, options_.ema);
  clip_norm_ = options_.max_grad_norm;
  const std::vector<StepRelease> declared =
      options_.is_private ? at_sigma(step_releases(), options_.noise_multiplier.value_or(0.0)) : std::vector<StepRelease>{};
  const ResumableState resumable{*optimizer, ema, sampler, noise, secret};
  if (context.resume) {
    resumable.load(*context.resume);
    load_own_state(*context.resume);
  }
  const std::int64_t first_step = context.resume ? context.resume_step : 0;
  const StateWriter save_state = [this, &resumable](torch::serialize::OutputArchive& state) {
    resumable.save(state);
    save_own_state(state);
  };
  const auto device = params.front().device();
  const double expected_batch = q * static_cast<double>(n);
  // The step's per-example norms before clipping, for after_step_gradient (collected in the loop only:
  // the engine's planning and timing chunks are no step's).
  std::vector<at::Tensor> step_norms;
  bool in_step = false;
  ChunkTrainer chunks(options_, data, model, loss_seed, expected_batch, device, ranks,
                      [this, &step_norms, &in_step](torch::nn::Module& module, const RowLoss& loss,
                                                    std::int64_t examples) {
                        ClippedSum sum = clipped_chunk_sum(module, loss, examples);
                        if (in_step && sum.norms.defined()) step_norms.push_back(sum.norms.detach().to(at::kDouble).cpu());
                        return sum;
                      });
  const PrivacyEvent one_step = options_.is_private ? step_event_of(*options_.noise_multiplier, q, declared)
                                                    : PrivacyEvent::no_op();

  const bool measure = options_.is_private && secret && options_.engine_path == EnginePath::automatic;
  if (options_.is_private) {
    // Reproducible streams promise the same run for the same seed, bit for bit: timings must not
    // choose anything there, so the plan follows the shapes alone (cost model, configured chunks).
    planner_ = NormPlanner(measure ? NormPlanner::Mode::calibrate : NormPlanner::Mode::cost_model);
    engine_plan_ = measure ? detail::plan_engine(options_, model.module(), chunks, expected_batch, ranks != nullptr, planner_,
                                                       clip_rule())
                           : EnginePlan{options_.engine_path == EnginePath::micro_batch || !has_closed_form(model.module())
                                            ? EnginePath::micro_batch
                                            : EnginePath::vectorised,
                                        options_.physical_batch_size, {}, options_.clip_passes};
    if (!measure && engine_plan_.path == EnginePath::vectorised) {
      // The norm strategies by shape, before the first step. Planned lazily on the first private
      // chunk instead, the plan the first step reports (metrics.jsonl) would tell whether that chunk
      // was empty (found by the record-replay audit). One synthetic example, in eval mode so that
      // no dropout draws from the global generator (reproducible runs stay bit for bit).
      const bool training = model.module().is_training();
      model.module().eval();
      clipped_chunk_sum(model.module(), chunks.synthetic_loss(1), 1);
      model.module().train(training);
    }
  }

  context.ledger.begin_step();  // earlier stages' events are not this stage's steps
  for (std::int64_t step = first_step; step < total_steps; ++step) {
    if (options_.is_private && step > first_step) refuse_separately_sampled(context.ledger, step);  // the last step's
    const at::Tensor batch = draw_batch(ranks, sampler);
    const std::int64_t b = batch.numel();
    optimizer->zero_grad();
    const double step_clip = clip_norm_;
    PrivateGradient gradient(params, step_clip, options_.clipping, ranks);
    step_norms.clear();
    in_step = true;
    double loss_sum = chunks.train(batch, step, gradient);
    in_step = false;
    if (options_.is_private) {
      noise_step_gradient(gradient, expected_batch, noise);  // once per logical step, however many chunks
      torch::NoGradGuard no_grad;
      make_step_releases(context, noise, step + 1, step_norms.empty() ? at::zeros({0}, at::kDouble) : at::cat(step_norms),
                         declared);
    } else if (ranks) {
      all_reduce_gradients(*ranks, params);
    }
    if (ranks) loss_sum = all_reduce_loss(*ranks, loss_sum, device);
    if (options_.is_private || b > 0) {  // a non-private empty batch has nothing to learn from
      optimizer->step();
      if (options_.is_private) context.ledger.record(one_step);  // the noisy gradient has been released
      update_moving_average(ema, params, options_.ema);
    }
    if (context.step_done) {
      StepReport report{step + 1, total_steps, b ? loss_sum / b : 0.0, b, {}, options_.is_private ? step_clip : 0.0,
                        options_.is_private ? step_metrics() : std::map<std::string, double>{},
                        std::move(stated_bases_)};  // (cleared before each step's releases)
      // On the stage's first step, when every layer has its plan; after a resume again only when the
      // plan was measured anew (a reproducible run's follows the shapes: its metrics stay those of
      // an uninterrupted run).
      if (options_.is_private && (step == 0 || (step == first_step && measure))) {
        report.engine = engine_plan_.describe(planner_);
      }
      context.step_done(report, save_state);
    }
  }
  if (options_.is_private) refuse_separately_sampled(context.ledger, total_steps);
  load_ema(params, ema);
}

}  // namespace privdiff::sdk::engine
