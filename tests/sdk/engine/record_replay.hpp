#pragma once
// Record-replay sensitivity audit (issue #36 item 7): the grey-box check that runs a mechanism on
// neighbouring datasets D and D ∪ {x} (add/remove adjacency, x appended last) with identical
// randomness — test-only seeds chosen so that every record of D has the same Poisson membership in
// both runs and x is in the audited batch — and asserts
//   1. sensitivity: the releases differ by at most the mechanism's declared sensitivity (the noise
//      is the same draw in both runs, so it cancels; what remains is x's clipped contribution);
//   2. structure: nothing released or public (ledger, step reports, engine plan, noise draws
//      consumed, released shapes) depends on x's presence, and no internal decision (physical
//      chunks, forward calls, collectives) depends on x's content: a run with an extreme x and one
//      with a typical reference record x_ref make the same decisions. (The realised batch size is
//      secret and its chunks follow it; that is allowed, so chunk counts are compared between x and
//      x_ref, which are both in the batch.)
//   3. replay fidelity: the records of D contribute the same in both runs (their per-example norms
//      agree), so the replay really isolates x.
// The DP-SGD audit replays three versions of a logical step k (the first by default): x among D's
// sampled records, x alone (D's batch empty: D's release is pure noise), and x in the data but not in
// the batch (only the public N changed: the release must not move). For k > 1, x is in none of the
// batches before k (fixed membership): both runs then reach step k from the same state, bit for bit
// (checked: the earlier releases are equal), so the k-th release differs by x's clipped contribution
// alone and the bound is C again. Each check returns what it found as text (empty: it holds),
// so a test can show that the harness reports the planted bugs below (sensitivity 2C, chunking that
// depends on x, a frozen parameter that trains, a resume that starts over).
// Models: a toy (ReplayModel) or any sdk::Model (ModelSpec::make, e.g. an installed plugin with an
// adapter): the parameters the stage must not train are checked bit-identical after every run. A
// real denoising loss draws its noise for a whole chunk at once, so adding x to a chunk changes D's
// draws: DpSgdAudit::x_alone_in_chunk picks batches where x is alone in the last physical chunk.
// Runs may stop after some steps and resume from a checkpoint written and read by the host's own
// save_checkpoint / load_checkpoint (ModelSpec::resume_after); audit_resume checks that such a run
// equals an uninterrupted one.
// Not replayable, so not covered: secure noise (fresh OS randomness in each run; the engine's
// arithmetic is the same as with reproducible streams) and RandAugment (it draws its ops for a
// whole chunk at once, so adding x changes the draws of D's records; the guarantee holds for any
// draws, but an identical-seed replay cannot isolate x).
//
// Mechanisms covered: DP-SGD (DpSgdMechanism and the installed dpsgd / dpdm plugins, through any
// sdk::Mechanism: the release is read from the weights, SGD with lr 1 and no momentum or EMA);
// DP-FETA's central images in record_replay_central.hpp.
#include "run/run_checkpoint.hpp"

#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace privdiff::testing::replay {

namespace engine = privdiff::sdk::engine;

// ---------------------------------------------------------------------------------------------
// Findings and measurements

/// One measured distance between the releases on D and D ∪ {x}, against the declared bound.
struct Measurement {
  std::string name;
  double distance = 0;  ///< in the units of the bound (e.g. ||Δ released gradient|| times q N)
  double bound = 0;
  double x_norm = std::nan("");  ///< x's own gradient norm before clipping, where the engine shows it
};

struct Report {
  std::vector<std::string> violations;  ///< empty: every check held
  std::vector<Measurement> measurements;
  /// The largest relative change of a record of D's gradient norm between the runs on D and on
  /// D ∪ {x} (0: the replay isolated x exactly).
  double fidelity = 0;

  void add(const std::string& finding) {
    if (!finding.empty()) violations.push_back(finding);
  }
  void merge(const Report& other) {
    violations.insert(violations.end(), other.violations.begin(), other.violations.end());
    measurements.insert(measurements.end(), other.measurements.begin(), other.measurements.end());
    fidelity = std::max(fidelity, other.fidelity);
  }
  /// The largest distance / bound over the measurements with a positive bound.
  double worst_ratio() const {
    double worst = 0;
    for (const auto& m : measurements) {
      if (m.bound > 0) worst = std::max(worst, m.distance / m.bound);
    }
    return worst;
  }
  std::string describe() const {
    std::ostringstream out;
    for (const auto& m : measurements) {
      char line[256];
      std::snprintf(line, sizeof line, "  %-64s %.9g / %.9g", m.name.c_str(), m.distance, m.bound);
      out << line;
      if (!std::isnan(m.x_norm)) out << "   (x's norm: " << m.x_norm << ")";
      out << "\n";
    }
    if (fidelity > 0) out << "  replay fidelity: D's records' norms moved by at most " << fidelity << " (relative)\n";
    for (const auto& v : violations) out << "  VIOLATION: " << v << "\n";
    return out.str();
  }
};

/// `scale` * ||with - without||_2 over every released tensor, against `bound` (with a relative and
/// an absolute slack for rounding). Differing counts, shapes or dtypes, and values that are not
/// finite, are findings of their own.
inline Measurement distance_between(const std::string& what, const std::vector<at::Tensor>& without,
                                    const std::vector<at::Tensor>& with, double scale, double bound,
                                    double relative_slack, double absolute_slack, Report& report,
                                    double x_norm = std::nan("")) {
  Measurement m{what, std::nan(""), bound, x_norm};
  if (without.size() != with.size()) {
    report.add(what + ": " + std::to_string(without.size()) + " tensors released on D, " +
               std::to_string(with.size()) + " on D + x");
    return m;
  }
  double squares = 0;
  for (std::size_t j = 0; j < without.size(); ++j) {
    if (without[j].sizes() != with[j].sizes() || without[j].scalar_type() != with[j].scalar_type()) {
      std::ostringstream s;
      s << what << ": released tensor " << j << " is " << without[j].sizes() << " " << without[j].scalar_type()
        << " on D but " << with[j].sizes() << " " << with[j].scalar_type() << " on D + x";
      report.add(s.str());
      return m;
    }
    const at::Tensor a = without[j].to(at::kDouble), b = with[j].to(at::kDouble);
    if (!at::isfinite(a).all().item<bool>() || !at::isfinite(b).all().item<bool>()) {
      report.add(what + ": released tensor " + std::to_string(j) + " is not finite");
      return m;
    }
    squares += (b - a).pow(2).sum().item<double>();
  }
  m.distance = scale * std::sqrt(squares);
  report.measurements.push_back(m);
  if (!(m.distance <= bound * (1 + relative_slack) + absolute_slack)) {
    char text[160];
    std::snprintf(text, sizeof text, ": the releases on D and D + x differ by %.9g, more than the declared sensitivity %.9g",
                  m.distance, bound);
    report.add(what + text);
  }
  return m;
}

/// The first place where two ordered logs differ ("" when equal).
inline std::string first_difference(const std::string& what, const std::vector<std::string>& a,
                                    const std::vector<std::string>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return what + ", entry " + std::to_string(i) + ": \"" + a[i] + "\" vs \"" + b[i] + "\"";
  }
  if (a.size() != b.size()) {
    return what + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " entries (first extra: \"" +
           (a.size() > n ? a[n] : b[n]) + "\")";
  }
  return "";
}

inline std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes() << " " << t.scalar_type();
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// What a run did

/// An ordered record of a run's observable decisions, split by who may see them.
struct Trace {
  /// Released or public (ledger, step reports, engine plan, noise draws, released shapes): may
  /// depend on the public configuration and N only — the same on D and on D ∪ {x}.
  std::vector<std::string> released;
  /// Internal decisions (physical chunks, forward calls, collectives): may follow the realised
  /// batch size (x in the batch or not), never x's content — the same on D ∪ {x} and D ∪ {x_ref}.
  std::vector<std::string> internal;
};

// ---------------------------------------------------------------------------------------------
// Test doubles: a tiny model and dataset

/// A denoiser on 1x4x4 images from per-example layers of three kinds (conv, group norm, linear):
/// out = conv2(silu(norm(conv1(x)))) + lin(x). Its loss is the K-row denoising loss with the
/// loss's own noise from the engine's generator. Every loss evaluation is logged (rows and shape)
/// into `log` when set: the forward calls a step makes.
class ReplayModel : public sdk::Model {
 public:
  ReplayModel(at::ScalarType dtype, double loss_noise, std::uint64_t init_seed = 1)
      : net_(std::make_shared<torch::nn::Module>()), loss_noise_(loss_noise) {
    conv1_ = net_->register_module("conv1", std::make_shared<engine::Conv2d>(engine::Conv2dOptions{1, 4, {3, 3}, {1, 1}, {1, 1}}));
    norm_ = net_->register_module("norm", std::make_shared<engine::GroupNorm>(2, 4));
    conv2_ = net_->register_module("conv2", std::make_shared<engine::Conv2d>(engine::Conv2dOptions{4, 1, {3, 3}, {1, 1}, {1, 1}}));
    lin_ = net_->register_module("lin", std::make_shared<engine::Linear>(16, 16));
    net_->to(dtype);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed);
    torch::NoGradGuard no_grad;
    for (auto& p : net_->parameters()) p.copy_(at::randn(p.sizes(), gen, at::TensorOptions().dtype(at::kDouble)) * 0.3);
  }
  torch::nn::Module& module() override { return *net_; }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor&, const sdk::Conditioning&) override { return body(x); }
  std::vector<sdk::ParameterInfo> parameters_with_roles() override { return {}; }
  std::vector<std::int64_t> sample_shape() const override { return {1, 4, 4}; }
  at::Tensor training_loss(const at::Tensor& images, const sdk::Conditioning&, std::int64_t k, at::Generator& gen) override {
    if (log) log->push_back("loss over " + std::to_string(images.size(0)) + " examples x K " + std::to_string(k));
    const at::Tensor x = images.to(lin_->weight.scalar_type()).repeat_interleave(k, 0);
    const at::Tensor noisy = loss_noise_ > 0 ? x + loss_noise_ * at::randn(x.sizes(), gen, x.options()) : x;
    return (body(noisy) - x).pow(2).flatten(1).mean(1);
  }
  at::Tensor body(const at::Tensor& x) {
    const at::Tensor h = conv2_->forward(at::silu(norm_->forward(conv1_->forward(x))));
    return h + lin_->forward(x.flatten(1)).view_as(h);
  }
  std::vector<std::string>* log = nullptr;

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::shared_ptr<engine::Conv2d> conv1_, conv2_;
  std::shared_ptr<engine::GroupNorm> norm_;
  std::shared_ptr<engine::Linear> lin_;
  double loss_noise_;
};

/// Any sdk::Model as the harness runs it (ModelSpec::make): every call goes to the model, and every
/// loss evaluation is logged (rows and shape) into `log` when set, as ReplayModel logs its own.
class LoggedModel : public sdk::Model {
 public:
  explicit LoggedModel(std::unique_ptr<sdk::Model> model) : model_(std::move(model)) {}
  torch::nn::Module& module() override { return model_->module(); }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const sdk::Conditioning& cond) override {
    return model_->denoise(x, sigma, cond);
  }
  std::vector<sdk::ParameterInfo> parameters_with_roles() override { return model_->parameters_with_roles(); }
  std::vector<std::int64_t> sample_shape() const override { return model_->sample_shape(); }
  std::vector<std::int64_t> image_shape() const override { return model_->image_shape(); }
  at::Tensor encode(const at::Tensor& images) override { return model_->encode(images); }
  at::Tensor decode(const at::Tensor& latents) override { return model_->decode(latents); }
  at::Tensor training_loss(const at::Tensor& images, const sdk::Conditioning& cond, std::int64_t k,
                           at::Generator& gen) override {
    if (log) log->push_back("loss over " + std::to_string(images.size(0)) + " examples x K " + std::to_string(k));
    return model_->training_loss(images, cond, k, gen);
  }
  std::vector<std::string>* log = nullptr;

 private:
  std::unique_ptr<sdk::Model> model_;
};

/// The model of every run of an audit, and how each run goes.
struct ModelSpec {
  at::ScalarType dtype = at::kDouble;
  double loss_noise = 0.3;  ///< ReplayModel's loss noise; 0: a deterministic loss
  std::uint64_t init_seed = 1;  ///< ReplayModel's weights
  /// A real model instead of ReplayModel, built afresh for each run: it must give the same model,
  /// weights included, every time (seed the global generator before building it). Its module is
  /// cast to `dtype`.
  std::function<std::unique_ptr<sdk::Model>()> make;
  /// The parameters the stage trains; every other one must stay bit-identical (checked after each
  /// run). Unset: those the mechanism's select_trainable freezes must stay.
  std::optional<engine::ParameterSelection> trains;
  /// > 0: each run stops after this many logical steps, the host's save_checkpoint writes its
  /// checkpoint (model, global generator, ledger, mechanism state) to a file, and a fresh model and
  /// mechanism loaded from it by load_checkpoint finish the stage, as `privdiff run --resume` does.
  std::int64_t resume_after = 0;
};

/// The model of one run (ModelSpec::make's, cast to spec.dtype, or a ReplayModel), its loss logged
/// into `log`.
inline std::unique_ptr<sdk::Model> build_model(const ModelSpec& spec, std::vector<std::string>* log) {
  if (!spec.make) {
    auto model = std::make_unique<ReplayModel>(spec.dtype, spec.loss_noise, spec.init_seed);
    model->log = log;
    return model;
  }
  auto model = std::make_unique<LoggedModel>(spec.make());
  model->module().to(spec.dtype);
  model->log = log;
  return model;
}

/// Copies of every parameter of the model, in module order.
inline std::vector<at::Tensor> weights_of(sdk::Model& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.module().parameters()) out.push_back(p.detach().clone());
  return out;
}

/// Private labelled images held in memory; with(x) appends x last (index N): D ∪ {x}.
class ReplayData : public sdk::Dataset {
 public:
  ReplayData(at::Tensor images, at::Tensor labels, std::int64_t classes = 1)
      : images_(std::move(images)), labels_(std::move(labels)), classes_(classes) {}
  explicit ReplayData(const at::Tensor& images) : ReplayData(images, at::zeros({images.size(0)}, at::kLong)) {}
  /// The images labelled 0, 1, ..., classes - 1 in turn.
  static ReplayData in_classes(const at::Tensor& images, std::int64_t classes) {
    return ReplayData(images, at::arange(images.size(0), at::kLong).remainder(classes), classes);
  }
  std::int64_t size() const override { return images_.size(0); }
  at::Tensor images(const at::Tensor& idx) const override { return images_.index_select(0, idx); }
  at::Tensor labels(const at::Tensor& idx) const override { return labels_.index_select(0, idx); }
  std::int64_t num_classes() const override { return classes_; }
  bool is_public() const override { return false; }
  std::string name() const override { return "record-replay images"; }
  ReplayData with(const at::Tensor& image, std::int64_t label = 0) const {
    return ReplayData(at::cat({images_, image.to(images_.scalar_type()).unsqueeze(0)}),
                      at::cat({labels_, at::full({1}, label, at::kLong)}), classes_);
  }
  const at::Tensor& all_images() const { return images_; }
  const at::Tensor& all_labels() const { return labels_; }

 private:
  at::Tensor images_, labels_;
  std::int64_t classes_;
};

/// A neighbouring record x: an image (and its label).
struct Neighbour {
  std::string name;
  at::Tensor image;  ///< [C, H, W]
  std::int64_t label = 0;
};

// ---------------------------------------------------------------------------------------------
// Instrumented DP-SGD: the real engine, with what each step did recorded

/// DpSgdMechanism with its two privacy-critical hooks recorded: each physical chunk (examples,
/// per-example norms before clipping, clipped sum before noise) and each logical step's noise
/// (blocks of the noise stream consumed, the divisor). Behaviour is the engine's own.
class RecordingMechanism : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;
  struct Step {
    std::vector<at::Tensor> clipped_sum;  ///< this rank's chunks, before noise (float64)
    at::Tensor norms = at::zeros({0}, at::kDouble);  ///< per example, before clipping, batch order
    std::int64_t chunks = 0;
  };
  std::vector<Step> steps;
  Trace* trace = nullptr;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    engine::ClippedSum sum = DpSgdMechanism::clipped_chunk_sum(module, loss, examples);
    record_chunk(examples, sum);
    return sum;
  }
  void noise_step_gradient(engine::PrivateGradient& gradient, double expected_batch_size,
                           engine::GaussianNoise& noise) override {
    const std::int64_t before = noise.state()[9].item<std::int64_t>();  // the block counter (seeded streams)
    DpSgdMechanism::noise_step_gradient(gradient, expected_batch_size, noise);
    const std::int64_t after = noise.state()[9].item<std::int64_t>();
    char line[128];
    std::snprintf(line, sizeof line, "noise: %lld blocks, divisor %.9g", static_cast<long long>(after - before),
                  expected_batch_size);
    if (trace) trace->released.push_back(line);
    steps.push_back(current_);
    current_ = Step{};
  }
  void record_chunk(std::int64_t examples, const engine::ClippedSum& sum) {
    if (trace) trace->internal.push_back("chunk of " + std::to_string(examples) + " examples");
    current_.norms = at::cat({current_.norms, sum.norms.to(at::kDouble).to(at::kCPU)});
    if (current_.clipped_sum.empty()) {
      for (const auto& s : sum.sums) current_.clipped_sum.push_back(s.detach().to(at::kDouble).clone());
    } else {
      for (std::size_t j = 0; j < sum.sums.size(); ++j) current_.clipped_sum[j] += sum.sums[j].detach().to(at::kDouble);
    }
    ++current_.chunks;
  }

 private:
  Step current_;
};

/// Planted bug (a), sensitivity 2C: each example is clipped to 2C while the ledger says C.
class ClipsAtTwiceC : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    engine::ClippedSum sum = engine::clipped_gradient_sum(module, loss, examples, options().noise_multiplicity,
                                                          2 * options().max_grad_norm, options().clipping);
    record_chunk(examples, sum);
    return sum;
  }
};

/// Planted bug (b), data-dependent chunking: a chunk holding an example whose gradient norm is over
/// 100 C is redone in two halves ("for accuracy"). The sum is the same; the number of chunks and
/// forward calls (hence the step's time) now tells whether such an x is in the batch.
class SplitsChunksWithLargeGradients : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    engine::ClippedSum whole = DpSgdMechanism::clipped_chunk_sum(module, loss, examples);
    if (examples < 2 || whole.norms.max().item<double>() < 100 * options().max_grad_norm) {
      record_chunk(examples, whole);
      return whole;
    }
    const std::int64_t half = examples / 2;
    auto part = [&](std::int64_t offset, std::int64_t len) {
      const engine::RowLoss shifted = [&loss, offset](const at::Tensor& e) { return loss(e + offset); };
      return RecordingMechanism::clipped_chunk_sum(module, shifted, len);
    };
    engine::ClippedSum a = part(0, half), b = part(half, examples - half);
    for (std::size_t j = 0; j < a.sums.size(); ++j) a.sums[j] = a.sums[j] + b.sums[j];
    a.norms = at::cat({a.norms, b.norms});
    a.factors = at::cat({a.factors, b.factors});
    return a;
  }
};

/// Planted bug (c), a selection ignored: every parameter trains, though the stage's `train` names a
/// subset. The clipped sum still holds C; only the check of the frozen parameters can see it.
class TrainsEverything : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;
  void select_trainable(sdk::Model& model) const override {
    for (auto& p : model.module().parameters()) p.set_requires_grad(true);
  }
};

/// Planted bug (d), a resume that starts over: the checkpoint's mechanism state is ignored and the
/// stage is redone from its first step, on the restored weights (spending those steps again).
class StartsOverOnResume : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;
  void run(sdk::StageContext& context) override {
    context.resume = nullptr;
    context.resume_step = 0;
    RecordingMechanism::run(context);
  }
};

/// Logs every collective (op and shapes) into a trace, then passes it on.
class RecordingCollective : public sdk::Collective {
 public:
  RecordingCollective(sdk::Collective& inner, std::vector<std::string>& log) : inner_(inner), log_(log) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    std::string line = "all_reduce";
    for (const auto& t : tensors) line += " " + shape_of(t);
    log_.push_back(line);
    inner_.all_reduce_sum(tensors);
  }
  void broadcast(at::Tensor& tensor, int root) override {
    log_.push_back("broadcast " + shape_of(tensor) + " from " + std::to_string(root));
    inner_.broadcast(tensor, root);
  }

 private:
  sdk::Collective& inner_;
  std::vector<std::string>& log_;
};

// ---------------------------------------------------------------------------------------------
// Running a DP-SGD stage on one dataset

/// What one rank saw of a stage: the release of each logical step (the update the optimizer
/// applied, divided by lr: with SGD, lr 1, no momentum and no EMA, exactly the noised gradient
/// (clipped sum + noise) / (q N)), the trace, the ledger against the plan, the final weights, the
/// parameters it must not train that moved (each a finding) and, for a RecordingMechanism, its steps.
struct StageRun {
  std::vector<std::vector<at::Tensor>> releases;
  Trace trace;
  std::string ledger, planned;
  std::vector<RecordingMechanism::Step> recorded;
  std::vector<at::Tensor> final_weights;
  std::vector<std::string> frozen_moved;
};

/// A mechanism for a run with the given test-only seed (reproducible streams keyed by it).
using MechanismFactory = std::function<std::unique_ptr<sdk::Mechanism>(std::uint64_t seed)>;

namespace detail {

// A parameter the stage must not train, with its value before the run.
struct FrozenParameter {
  std::string name;
  at::Tensor live, before;
};

// Those of ModelSpec::trains' complement (else those the mechanism left frozen), as they are now.
inline std::vector<FrozenParameter> frozen_parameters(sdk::Model& model, const ModelSpec& spec) {
  const std::vector<sdk::ParameterInfo> infos = engine::parameters_with_roles(model);
  const std::vector<bool> selected = spec.trains ? engine::selected_parameters(infos, *spec.trains) : std::vector<bool>{};
  std::vector<FrozenParameter> out;
  for (std::size_t j = 0; j < infos.size(); ++j) {
    const bool trains = spec.trains ? selected[j] : infos[j].parameter.requires_grad();
    if (!trains) out.push_back({infos[j].name, infos[j].parameter, infos[j].parameter.detach().clone()});
  }
  return out;
}

// Parameters the stage must not train that moved, in any run (one finding per run).
inline void check_frozen(const std::string& what, const std::vector<StageRun>& runs, Report& report) {
  for (const StageRun& r : runs) {
    if (r.frozen_moved.empty()) continue;
    report.add(what + ": " + std::to_string(r.frozen_moved.size()) + " parameters moved, though the stage does not " +
               "train them (first: " + r.frozen_moved.front() + ")");
  }
}

inline std::string step_line(const sdk::StepReport& report) {
  std::string line = "step " + std::to_string(report.step) + "/" + std::to_string(report.total_steps) + " engine {";
  for (const auto& [key, value] : report.engine) {
    if (key != "seconds_per_example") line += key + ": " + value + "; ";  // timings: measured, not decided
  }
  return line + "}";
}

using AfterStep = std::function<void(const sdk::StepReport&, const sdk::StateWriter&)>;

// One model and mechanism running a stage into `run`: the whole stage, or its part before or after a resume.
struct StageAttempt {
  std::unique_ptr<sdk::Model> model;
  std::unique_ptr<sdk::Mechanism> mechanism;
  sdk::StageContext context;

  StageAttempt(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
               sdk::PrivacyLedger& ledger, StageRun& run, sdk::Collective* collective)
      : model(build_model(spec, &run.trace.internal)), mechanism(make(seed)), context{*model, data, ledger, 0, {}} {
    context.collective = collective;
    if (auto* r = recording()) r->trace = &run.trace;
  }
  RecordingMechanism* recording() { return dynamic_cast<RecordingMechanism*>(mechanism.get()); }

  // Runs the mechanism, recording each step's release (the update it applied) and report; then
  // (also when `after_step`, which sees each step, stops the run by throwing) what it recorded and
  // which parameters it must not train moved.
  void run_steps(const ModelSpec& spec, StageRun& run, const AfterStep& after_step = {}) {
    mechanism->select_trainable(*model);
    const std::vector<FrozenParameter> frozen = frozen_parameters(*model, spec);
    std::vector<at::Tensor> before = weights_of(*model);
    context.step_done = [&](const sdk::StepReport& report, const sdk::StateWriter& state) {
      run.trace.released.push_back(step_line(report));
      const std::vector<at::Tensor> now = weights_of(*model);
      std::vector<at::Tensor> update;
      for (std::size_t j = 0; j < now.size(); ++j) update.push_back(before[j] - now[j]);
      run.releases.push_back(update);
      before = now;
      if (after_step) after_step(report, state);
    };
    auto keep = [&] {
      for (const auto& f : frozen) {
        if (!at::equal(f.live, f.before)) run.frozen_moved.push_back(f.name);
      }
      if (auto* r = recording()) run.recorded.insert(run.recorded.end(), r->steps.begin(), r->steps.end());
    };
    try {
      mechanism->run(context);
    } catch (...) {
      keep();
      throw;
    }
    keep();
  }
};

// A checkpoint file of its own for each resumed run (ranks run in threads of one process).
inline std::filesystem::path checkpoint_file() {
  static std::atomic<int> count{0};
  return std::filesystem::temp_directory_path() /
         ("privdiff-replay-" + std::to_string(::getpid()) + "-" + std::to_string(count++) + ".pt");
}

// Runs `first` for spec.resume_after steps and writes its checkpoint with the host's save_checkpoint;
// a fresh model and mechanism, loaded by the host's load_checkpoint (weights, global generator,
// mechanism state; the ledger from its JSON, as the host restores it), finish the stage. Returns them.
inline std::unique_ptr<StageAttempt> stop_and_resume(StageAttempt& first, const MechanismFactory& make,
                                                     std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
                                                     sdk::PrivacyLedger& ledger, StageRun& run,
                                                     sdk::Collective* collective) {
  struct Stopped {};
  const std::filesystem::path file = checkpoint_file();
  try {
    first.run_steps(spec, run, [&](const sdk::StepReport& report, const sdk::StateWriter& state) {
      if (report.step != spec.resume_after) return;
      core::CheckpointPosition position;
      position.step = report.step;
      position.ledger_json = sdk::to_json(ledger);
      core::save_checkpoint(file, position, *first.model, state);
      throw Stopped{};
    });
    throw std::logic_error("resume_after " + std::to_string(spec.resume_after) + ": the stage ended before that step");
  } catch (const Stopped&) {
  }
  auto second = std::make_unique<StageAttempt>(make, seed, spec, data, ledger, run, collective);
  const core::LoadedCheckpoint loaded = core::load_checkpoint(file, *second->model);
  std::filesystem::remove(file);
  ledger = sdk::privacy_ledger_from_json(loaded.position.ledger_json);
  second->context.resume = loaded.mechanism_state.get();
  second->context.resume_step = loaded.position.step;
  second->run_steps(spec, run);
  second->context.resume = nullptr;
  return second;
}

// What the stage left: the final weights and which train, the ledger against the plan.
inline void finish_stage(StageAttempt& last, const sdk::PrivacyLedger& ledger, const sdk::Dataset& data, StageRun& run) {
  std::size_t trainable = 0, all = 0;
  for (const auto& p : last.model->module().parameters()) {
    trainable += p.requires_grad() ? 1 : 0;
    ++all;
    run.trace.released.push_back("final weight " + shape_of(p));
  }
  run.trace.released.push_back("trainable: " + std::to_string(trainable) + " of " + std::to_string(all) + " tensors");
  run.trace.released.push_back("ledger: " + std::to_string(ledger.steps()) + " steps in " +
                               std::to_string(ledger.entries().size()) + " entries, " +
                               std::to_string(ledger.caveats().size()) + " caveats");
  for (const auto& c : ledger.caveats()) run.trace.released.push_back("caveat: " + c);
  run.ledger = ledger.total().to_string();
  run.planned = last.mechanism->planned_events(data.size()).to_string();
  run.final_weights = weights_of(*last.model);
}

}  // namespace detail

/// Runs a stage of the mechanism `make` builds (with `seed`) on a model `spec` builds and `data`, as
/// one rank of `ranks` (null: one process); stopped and resumed after spec.resume_after steps when
/// that is set. Throws what the mechanism throws.
inline StageRun run_stage(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
                          sdk::Collective* ranks = nullptr) {
  StageRun run;
  sdk::PrivacyLedger ledger;
  std::unique_ptr<RecordingCollective> collective;
  if (ranks) collective = std::make_unique<RecordingCollective>(*ranks, run.trace.internal);
  auto attempt = std::make_unique<detail::StageAttempt>(make, seed, spec, data, ledger, run, collective.get());
  if (spec.resume_after > 0) {
    attempt = detail::stop_and_resume(*attempt, make, seed, spec, data, ledger, run, collective.get());
  } else {
    attempt->run_steps(spec, run);
  }
  detail::finish_stage(*attempt, ledger, data, run);
  return run;
}

/// A run stopped and resumed (ModelSpec::resume_after) against the same run uninterrupted: every
/// step's release and the final weights equal, and the same ledger and released trace.
inline Report compare_runs(const std::string& what, const StageRun& uninterrupted, const StageRun& resumed) {
  Report report;
  const std::size_t steps = std::min(uninterrupted.releases.size(), resumed.releases.size());
  if (uninterrupted.releases.size() != resumed.releases.size()) {
    report.add(what + ": " + std::to_string(uninterrupted.releases.size()) + " steps uninterrupted, " +
               std::to_string(resumed.releases.size()) + " resumed");
  }
  auto same = [&](const std::string& part, const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    Report scratch;
    const Measurement m = distance_between(what + ", " + part, a, b, 1.0, 0.0, 0.0, 0.0, scratch);
    report.measurements.insert(report.measurements.end(), scratch.measurements.begin(), scratch.measurements.end());
    if (scratch.violations.empty()) return;
    report.add(std::isnan(m.distance) ? scratch.violations.front()
                                      : what + ", " + part + ": " + std::to_string(m.distance) +
                                            " away from the uninterrupted run's");
  };
  for (std::size_t j = 0; j < steps; ++j) {
    same("step " + std::to_string(j + 1) + "'s update", uninterrupted.releases[j], resumed.releases[j]);
  }
  same("final weights", uninterrupted.final_weights, resumed.final_weights);
  if (uninterrupted.ledger != resumed.ledger) {
    report.add(what + ": the ledger is " + resumed.ledger + " resumed, " + uninterrupted.ledger + " uninterrupted");
  }
  report.add(first_difference(what + ": the released trace differs", uninterrupted.trace.released, resumed.trace.released));
  detail::check_frozen(what, {resumed}, report);
  return report;
}

/// The stage run uninterrupted (mechanisms from `make`) and stopped after `stop_after` steps and
/// resumed (mechanisms from `make_resumed`: the same factory, or a planted bug), compared by
/// compare_runs.
inline Report audit_resume(const std::string& what, const MechanismFactory& make, const MechanismFactory& make_resumed,
                           std::uint64_t seed, ModelSpec spec, const sdk::Dataset& data, std::int64_t stop_after) {
  spec.resume_after = 0;
  const StageRun uninterrupted = run_stage(make, seed, spec, data);
  spec.resume_after = stop_after;
  return compare_runs(what, uninterrupted, run_stage(make_resumed, seed, spec, data));
}

/// Runs a stage on every rank of a run (one rank: this process) and returns each rank's StageRun.
using Runner = std::function<std::vector<StageRun>(const MechanismFactory&, std::uint64_t seed, const ModelSpec&,
                                              const sdk::Dataset&)>;

inline std::vector<StageRun> one_process(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec,
                                    const sdk::Dataset& data) {
  return {run_stage(make, seed, spec, data, nullptr)};
}

/// The DP-SGD sampling rate for n records (the engine's: min(1, B / n)).
inline double sampling_rate(std::int64_t batch, std::int64_t n) {
  return std::min(1.0, static_cast<double>(batch) / static_cast<double>(n));
}

/// What a replay needs of the Poisson batches (replay_seed).
struct BatchPlan {
  std::int64_t step = 1;       ///< k: the logical step whose batch is arranged (1: the first)
  bool x_in_batch = true;      ///< x in the k-th batch of D ∪ {x} (it is in none before)
  bool d_batch_empty = false;  ///< D's k-th batch empty (x alone in the batch of D ∪ {x})
  std::int64_t chunk = 0;      ///< > 0: D's k-th batch a non-empty multiple of it
};

/// A test-only seed whose Poisson batches on N + 1 records (rate `q_with`) are the batches on N
/// records (rate `q_without`) at every step before k (x in none: fixed membership), and at step k
/// that batch plus x (index N), or without it for x_in_batch = false. The two rates differ when
/// q = B / N (the engine's DP-SGD); for central images they are one q_c.
inline std::uint64_t replay_seed(std::int64_t n, double q_without, double q_with, const BatchPlan& plan) {
  auto same = [](const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::equal(a, b); };
  for (std::uint64_t seed = 1; seed < 1000000; ++seed) {
    engine::PoissonSampler without(n, q_without,
                                   engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
    engine::PoissonSampler with(n + 1, q_with,
                                engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
    bool fits = true;
    for (std::int64_t step = 1; step < plan.step && fits; ++step) fits = same(with.next(), without.next());
    if (!fits) continue;
    at::Tensor expected = without.next();
    const std::int64_t b = expected.numel();
    if (plan.d_batch_empty && b > 0) continue;
    if (plan.chunk > 0 && (b == 0 || b % plan.chunk != 0)) continue;
    if (plan.x_in_batch) expected = at::cat({expected, at::full({1}, n, at::kLong)});
    if (same(with.next(), expected)) return seed;
  }
  throw std::runtime_error("replay_seed: no seed found");
}

/// replay_seed for the first step: x in its batch (or not), D's batch empty or not.
inline std::uint64_t replay_seed(std::int64_t n, double q_without, double q_with, bool x_in_batch,
                                 bool d_batch_empty = false) {
  return replay_seed(n, q_without, q_with, BatchPlan{1, x_in_batch, d_batch_empty, 0});
}

// ---------------------------------------------------------------------------------------------
// The DP-SGD audit

struct DpSgdAudit {
  std::string name;
  MechanismFactory mechanism;
  ModelSpec model;
  std::int64_t batch_size = 7;  ///< B: q = B / N, and the divisor q N = B of the release
  double lr = 1.0;              ///< the optimizer's (SGD, no momentum): the release is the update / lr
  double max_grad_norm = 1.0;   ///< C, the declared sensitivity of the clipped sum
  double relative_slack = 1e-9;  ///< for rounding, on the bound
  double fidelity = 1e-9;        ///< relative: how closely D's records must replay
  bool check_alone = true;       ///< also replay a step whose batch holds x alone (D's batch empty)
  /// k: the logical step audited (the mechanism must take at least k). x is in no batch before it,
  /// so both runs reach it from the same state; the releases before it must be equal.
  std::int64_t step = 1;
  /// P > 0: D's k-th batch is a non-empty multiple of P, so that with the mechanism's physical chunks
  /// of P examples x is alone in the last chunk. For a loss that draws its randomness for a whole
  /// chunk at once (the diffusion models' denoising loss on the vectorised path): with x in their
  /// chunk, D's records draw other noise levels, and the fidelity check fails (the guarantee holds
  /// for any such draws; an identical-seed replay just cannot isolate x). 0: x joins the last chunk.
  std::int64_t x_alone_in_chunk = 0;
  Runner runner = one_process;
};

namespace detail {

inline std::vector<at::Tensor> summed_over_ranks(const std::vector<StageRun>& ranks, std::size_t step) {
  std::vector<at::Tensor> sum;
  for (const StageRun& r : ranks) {
    if (r.recorded.size() <= step) continue;
    const auto& s = r.recorded[step].clipped_sum;
    if (sum.empty()) {
      for (const auto& t : s) sum.push_back(t.clone());
    } else {
      for (std::size_t j = 0; j < s.size(); ++j) sum[j] += s[j];
    }
  }
  return sum;
}

// D's records replayed: every per-example norm of D is found again on D ∪ {x}, which has exactly one
// more: x's. First in order, rank by rank (x comes last in the batch, so each rank's norms on D are
// a prefix of its norms on D ∪ {x}); failing that, as a multiset over all ranks (with one chunk per
// rank, x's presence moves records of D to the other rank). Returns x's norm.
inline double ordered_fidelity(const std::vector<StageRun>& d, const std::vector<StageRun>& dx, std::size_t step,
                               double tolerance, double& worst) {
  double x_norm = std::nan("");
  int extra = 0;
  worst = 0;
  for (std::size_t r = 0; r < d.size(); ++r) {
    const at::Tensor a = d[r].recorded[step].norms, b = dx[r].recorded[step].norms;
    const std::int64_t grown = b.numel() - a.numel();
    if (grown < 0 || grown > 1) return std::nan("");
    const at::Tensor shared = b.narrow(0, 0, a.numel());
    if (a.numel() > 0) {
      if (!at::allclose(shared, a, tolerance, 1e-12)) return std::nan("");
      worst = std::max(worst, ((shared - a).abs() / (a.abs() + 1e-300)).max().item<double>());
    }
    if (grown == 1) {
      x_norm = b[-1].item<double>();
      ++extra;
    }
  }
  return extra == 1 ? x_norm : std::nan("");
}

inline double check_fidelity(const std::string& what, const std::vector<StageRun>& d, const std::vector<StageRun>& dx,
                             std::size_t step, double tolerance, Report& report) {
  std::vector<at::Tensor> parts, parts_x;
  for (const StageRun& r : d) {
    if (r.recorded.size() <= step) return std::nan("");
    parts.push_back(r.recorded[step].norms);
  }
  for (const StageRun& r : dx) {
    if (r.recorded.size() <= step) return std::nan("");
    parts_x.push_back(r.recorded[step].norms);
  }
  double worst = 0;
  const double in_order = ordered_fidelity(d, dx, step, tolerance, worst);
  if (!std::isnan(in_order)) {
    report.fidelity = std::max(report.fidelity, worst);
    return in_order;
  }
  const at::Tensor a = std::get<0>(at::cat(parts).sort()), b = std::get<0>(at::cat(parts_x).sort());
  if (b.numel() != a.numel() + 1) {
    report.add(what + ": " + std::to_string(a.numel()) + " examples clipped on D but " + std::to_string(b.numel()) +
               " on D + x (the replay did not keep D's batch plus x)");
    return std::nan("");
  }
  auto close = [&](std::int64_t i, std::int64_t j) {
    const double u = a[i].item<double>(), v = b[j].item<double>();
    return std::abs(u - v) <= tolerance * std::abs(u) + 1e-12;
  };
  std::int64_t x_at = -1, j = 0;
  auto note = [&](std::int64_t i, std::int64_t k) {
    const double u = a[i].item<double>(), v = b[k].item<double>();
    report.fidelity = std::max(report.fidelity, std::abs(u - v) / (std::abs(u) + 1e-300));
  };
  for (std::int64_t i = 0; i < a.numel(); ++i, ++j) {
    if (close(i, j)) {
      note(i, j);
      continue;
    }
    if (x_at < 0 && j + 1 < b.numel() && close(i, j + 1)) {
      x_at = j++;
      note(i, j);
      continue;
    }
    char text[200];
    std::snprintf(text, sizeof text, ": a record of D has gradient norm %.9g on D but none such on D + x (nearest "
                  "%.9g): its contribution depends on x", a[i].item<double>(), b[j].item<double>());
    report.add(what + text);
    return std::nan("");
  }
  return b[x_at < 0 ? b.numel() - 1 : x_at].item<double>();
}

// Both runs took step k (else the audit proved nothing), and every step before it released the same
// update: x was in none of their batches, so they must be equal bit for bit.
inline bool check_earlier_steps(const std::string& what, const std::vector<StageRun>& d,
                                const std::vector<StageRun>& dx, std::size_t k, Report& report) {
  if (d[0].releases.size() <= k || dx[0].releases.size() <= k) {
    report.add(what + ": the stage took " + std::to_string(std::min(d[0].releases.size(), dx[0].releases.size())) +
               " steps, but the audit replays step " + std::to_string(k + 1));
    return false;
  }
  for (std::size_t j = 0; j < k; ++j) {
    Report same;
    distance_between("", d[0].releases[j], dx[0].releases[j], 1.0, 0.0, 0.0, 0.0, same);
    if (!same.violations.empty()) {
      report.add(what + ": step " + std::to_string(j + 1) + " released different updates, though x was in no batch yet");
    }
  }
  return true;
}

// The structure checks of one neighbour: released and public things as on D, internal decisions as
// with the reference record, the ledger as planned.
inline void check_structure(const std::string& what, const std::vector<StageRun>& d, const std::vector<StageRun>& dx,
                            const std::vector<StageRun>& dref, Report& report) {
  for (std::size_t r = 0; r < dx.size(); ++r) {
    const std::string rank = dx.size() > 1 ? " (rank " + std::to_string(r) + ")" : "";
    std::string f = first_difference(what + ": a released count, shape or decision depends on x's presence" + rank,
                                     d[r].trace.released, dx[r].trace.released);
    report.add(f);
    report.add(first_difference(what + ": a released count, shape or decision depends on x's content" + rank,
                                dref[r].trace.released, dx[r].trace.released));
    report.add(first_difference(what + ": an internal count or decision depends on x's content" + rank,
                                dref[r].trace.internal, dx[r].trace.internal));
    if (dx[r].ledger != dx[r].planned) {
      report.add(what + ": the ledger (" + dx[r].ledger + ") is not the plan (" + dx[r].planned + ")" + rank);
    }
    if (r > 0) {
      Report ranks_agree;
      distance_between("ranks", dx[0].releases.front(), dx[r].releases.front(), 1.0, 0.0, 0.0, 0.0, ranks_agree);
      if (!ranks_agree.violations.empty()) report.add(what + ": the ranks released different updates");
    }
  }
}

inline double release_scale(const DpSgdAudit& a) { return static_cast<double>(a.batch_size) / a.lr; }  // q N / lr

// x among D's sampled records at step k: D's records replayed, the k-th release and clipped sum
// within C, the earlier steps equal, and the structure checks.
inline void audit_in_batch(const DpSgdAudit& a, const ReplayData& d, std::uint64_t seed, const Neighbour& x,
                           const std::vector<StageRun>& on_d, const std::vector<StageRun>& on_ref, Report& report) {
  const std::string what = a.name + ", x = " + x.name;
  const auto k = static_cast<std::size_t>(a.step - 1);
  const std::vector<StageRun> on_x = a.runner(a.mechanism, seed, a.model, d.with(x.image, x.label));
  check_frozen(what, on_x, report);
  if (!check_earlier_steps(what, on_d, on_x, k, report)) return;
  const double x_norm = check_fidelity(what, on_d, on_x, k, a.fidelity, report);
  distance_between(what + ", released update", on_d[0].releases[k], on_x[0].releases[k], release_scale(a),
                   a.max_grad_norm, a.relative_slack, 0.0, report, x_norm);
  const auto sum_d = summed_over_ranks(on_d, k), sum_x = summed_over_ranks(on_x, k);
  if (!sum_d.empty()) {
    distance_between(what + ", clipped sum before noise", sum_d, sum_x, 1.0, a.max_grad_norm, a.relative_slack, 0.0,
                     report);
  }
  check_structure(what, on_d, on_x, on_ref, report);
}

// The audit's seed for batches arranged as `plan` at its step k.
inline std::uint64_t audit_seed(const DpSgdAudit& a, std::int64_t n, BatchPlan plan) {
  plan.step = a.step;
  return replay_seed(n, sampling_rate(a.batch_size, n), sampling_rate(a.batch_size, n + 1), plan);
}

// Runs on D and on D ∪ {x} with the seed of `plan`, for the check named `what`.
struct ReplayPair {
  std::string what;
  std::size_t k;  // the audited step, from 0
  std::vector<StageRun> on_d, on_x;
};
inline ReplayPair replay_pair(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, const BatchPlan& plan,
                              const std::string& label) {
  const std::uint64_t seed = audit_seed(a, d.size(), plan);
  return {a.name + ", x = " + x.name + label, static_cast<std::size_t>(a.step - 1),
          a.runner(a.mechanism, seed, a.model, d), a.runner(a.mechanism, seed, a.model, d.with(x.image, x.label))};
}

// x alone in the k-th batch: D's step is pure noise (an empty batch), D ∪ {x}'s is x's clipped
// gradient plus the same noise.
inline void audit_alone(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, Report& report) {
  const ReplayPair p = replay_pair(a, d, x, BatchPlan{1, true, true, 0}, " alone in the batch");
  check_frozen(p.what, p.on_x, report);
  if (!check_earlier_steps(p.what, p.on_d, p.on_x, p.k, report)) return;
  const double x_norm = check_fidelity(p.what, p.on_d, p.on_x, p.k, a.fidelity, report);
  distance_between(p.what + ", released update", p.on_d[0].releases[p.k], p.on_x[0].releases[p.k], release_scale(a),
                   a.max_grad_norm, a.relative_slack, 0.0, report, x_norm);
  for (std::size_t r = 0; r < p.on_x.size(); ++r) {
    report.add(first_difference(p.what + ": a released count, shape or decision depends on x's presence",
                                p.on_d[r].trace.released, p.on_x[r].trace.released));
  }
}

// x in the data set but in no batch up to step k: only the public N has changed, so the releases
// must not move.
inline void audit_out_of_batch(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, Report& report) {
  const ReplayPair p = replay_pair(a, d, x, BatchPlan{1, false, false, 0}, " not in the batch");
  if (!check_earlier_steps(p.what, p.on_d, p.on_x, p.k, report)) return;
  distance_between(p.what + ", released update", p.on_d[0].releases[p.k], p.on_x[0].releases[p.k], release_scale(a),
                   0.0, 0.0, 1e-9 * a.max_grad_norm, report);
}

}  // namespace detail

/// Runs the audit of logical step k = a.step: D, D ∪ {x_ref} and D ∪ {x} for each neighbour with
/// identical randomness (x in the k-th batch and in none before), then x alone in that batch (D's
/// empty), then x in no batch (the release must then be the same). Returns every finding and the
/// measured distances (in units of C).
inline Report audit_dp_sgd(const DpSgdAudit& a, const ReplayData& d, const std::vector<Neighbour>& neighbours,
                           const Neighbour& reference) {
  Report report;
  const std::uint64_t seed = detail::audit_seed(a, d.size(), BatchPlan{1, true, false, a.x_alone_in_chunk});
  const std::vector<StageRun> on_d = a.runner(a.mechanism, seed, a.model, d);
  const std::vector<StageRun> on_ref = a.runner(a.mechanism, seed, a.model, d.with(reference.image, reference.label));
  detail::check_frozen(a.name + ", on D", on_d, report);
  for (const Neighbour& x : neighbours) detail::audit_in_batch(a, d, seed, x, on_d, on_ref, report);
  if (!neighbours.empty() && a.check_alone) detail::audit_alone(a, d, neighbours.front(), report);
  if (!neighbours.empty()) detail::audit_out_of_batch(a, d, neighbours.front(), report);
  return report;
}

/// audit_dp_sgd on unlabelled images (every label 0).
inline Report audit_dp_sgd(const DpSgdAudit& a, const at::Tensor& images, const std::vector<Neighbour>& neighbours,
                           const Neighbour& reference) {
  return audit_dp_sgd(a, ReplayData(images), neighbours, reference);
}

/// DpSgdOptions for an audit: one or two logical steps of plain SGD (lr 1, no momentum, no EMA)
/// whose update is the released gradient; reproducible streams (the seed is the replay's).
inline engine::DpSgdOptions audit_options(std::int64_t batch_size, double max_grad_norm, double sigma) {
  engine::DpSgdOptions o;
  o.batch_size = batch_size;
  o.steps = 2;
  o.max_grad_norm = max_grad_norm;
  o.noise_multiplier = sigma;
  o.optimizer = "sgd";
  o.lr = 1.0;
  o.momentum = 0;
  o.ema = 0;
  o.secure_noise = false;
  // DpSgdOptions{} augments (RandAugmentOptions' default is 2 ops; a recipe's is 0). Augmentation
  // draws its ops for the whole chunk at once, so adding x changes the draws of D's records: the
  // identical-seed replay needs it off.
  o.augment.ops_per_image = 0;
  return o;
}

/// A factory of T (a RecordingMechanism or a planted bug) with `options` and the replay's seed.
template <class T>
MechanismFactory recording(engine::DpSgdOptions options) {
  return [options](std::uint64_t seed) {
    engine::DpSgdOptions o = options;
    o.seed = seed;
    return std::unique_ptr<sdk::Mechanism>(std::make_unique<T>(o));
  };
}

// ---------------------------------------------------------------------------------------------
// Neighbours

/// The shape [C, H, W] of one record (ReplayModel's: 1x4x4).
using ImageShape = std::vector<std::int64_t>;

/// Extreme but finite records of `shape`, plus typical random ones; `magnitude` sets how far out the
/// extreme pixels go.
inline std::vector<Neighbour> adversarial_neighbours(double magnitude, int random_ones = 3,
                                                     const ImageShape& shape = {1, 4, 4}) {
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  const std::string m = std::to_string(static_cast<long long>(magnitude));
  std::vector<Neighbour> xs;
  xs.push_back({"every pixel +" + m, at::full(shape, magnitude, opt)});
  xs.push_back({"every pixel -" + m, at::full(shape, -magnitude, opt)});
  std::int64_t pixels = 1;
  for (const std::int64_t side : shape) pixels *= side;
  const at::Tensor stripes = (at::arange(pixels, opt).remainder(2) * 2 - 1).reshape(shape) * magnitude;
  xs.push_back({"checkerboard +-" + m, stripes});  // on 4-wide images, alternating columns
  at::Tensor hot = at::zeros(shape, opt);
  hot[0][1][2] = magnitude;
  xs.push_back({"one hot pixel", hot});
  xs.push_back({"all zero", at::zeros(shape, opt)});
  for (int i = 0; i < random_ones; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + i);
    xs.push_back({"random " + std::to_string(i + 1), at::rand(shape, gen, opt) * 2 - 1});
  }
  return xs;
}

/// A typical record: what the adversarial ones are compared with for content independence.
inline Neighbour typical_reference(const ImageShape& shape = {1, 4, 4}) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
  return {"typical reference", at::rand(shape, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1};
}

/// N records of `shape` uniform in [-1, 1].
inline at::Tensor random_images(std::int64_t n, std::uint64_t seed = 7, const ImageShape& shape = {1, 4, 4}) {
  std::vector<std::int64_t> sizes{n};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::rand(sizes, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1;
}

}  // namespace privdiff::testing::replay
