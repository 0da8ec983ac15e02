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
// The DP-SGD audit replays three first steps: x among D's sampled records, x alone (D's batch
// empty: D's release is pure noise), and x in the data but not in the batch (only the public N
// changed: the release must not move). Each check returns what it found as text (empty: it holds),
// so a test can show that the harness reports the planted bugs below (sensitivity 2C, chunking that
// depends on x).
// Not replayable, so not covered: secure noise (fresh OS randomness in each run; the engine's
// arithmetic is the same as with reproducible streams) and RandAugment (it draws its ops for a
// whole chunk at once, so adding x changes the draws of D's records; the guarantee holds for any
// draws, but an identical-seed replay cannot isolate x).
//
// Mechanisms covered: DP-SGD (DpSgdMechanism and the installed dpsgd / dpdm plugins, through any
// sdk::Mechanism: the release is read from the weights, SGD with lr 1 and no momentum or EMA), and
// DP-FETA's central images (the mean and mode queries, and whole releases).
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/engine/central_images.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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
  std::vector<at::Tensor> weights() const {
    std::vector<at::Tensor> out;
    for (const auto& p : net_->parameters()) out.push_back(p.detach().clone());
    return out;
  }
  std::vector<std::string>* log = nullptr;

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::shared_ptr<engine::Conv2d> conv1_, conv2_;
  std::shared_ptr<engine::GroupNorm> norm_;
  std::shared_ptr<engine::Linear> lin_;
  double loss_noise_;
};

struct ModelSpec {
  at::ScalarType dtype = at::kDouble;
  double loss_noise = 0.3;  ///< 0: a deterministic loss
  std::uint64_t init_seed = 1;
};

/// Private labelled images held in memory; with(x) appends x last (index N): D ∪ {x}.
class ReplayData : public sdk::Dataset {
 public:
  ReplayData(at::Tensor images, at::Tensor labels, std::int64_t classes = 1)
      : images_(std::move(images)), labels_(std::move(labels)), classes_(classes) {}
  explicit ReplayData(const at::Tensor& images) : ReplayData(images, at::zeros({images.size(0)}, at::kLong)) {}
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

// D of the central-image replays: N = 23 records of 1x4x4 in two classes. `dark` for the mean (p in
// [0, 0.05]: no class mean reaches 1, nothing is clamped, the release inverts), `uniform` for the
// mode (x's one count can move a pixel's mode); `gen` draws the random neighbours after them.
struct CentralReplayData {
  static constexpr std::int64_t n = 23, classes = 2;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(41);
  at::Tensor dark = (at::rand({n, 1, 4, 4}, gen) * 0.1 - 1).to(at::kFloat);
  at::Tensor uniform = (at::rand({n, 1, 4, 4}, gen) * 2 - 1).to(at::kFloat);
  at::Tensor labels = at::arange(n, at::kLong).remainder(classes);
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
/// (clipped sum + noise) / (q N)), the trace, the ledger against the plan, and, for a
/// RecordingMechanism, its steps.
struct StageRun {
  std::vector<std::vector<at::Tensor>> releases;
  Trace trace;
  std::string ledger, planned;
  std::vector<RecordingMechanism::Step> recorded;
};

/// A mechanism for a run with the given test-only seed (reproducible streams keyed by it).
using MechanismFactory = std::function<std::unique_ptr<sdk::Mechanism>(std::uint64_t seed)>;

inline StageRun run_stage(const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec, const sdk::Dataset& data,
                     sdk::Collective* ranks = nullptr) {
  StageRun run;
  ReplayModel model(spec.dtype, spec.loss_noise, spec.init_seed);
  model.log = &run.trace.internal;
  std::unique_ptr<sdk::Mechanism> mechanism = make(seed);
  auto* recording = dynamic_cast<RecordingMechanism*>(mechanism.get());
  if (recording) recording->trace = &run.trace;
  sdk::PrivacyLedger ledger;
  sdk::StageContext context{model, data, ledger, 0, {}};
  std::unique_ptr<RecordingCollective> collective;
  if (ranks) {
    collective = std::make_unique<RecordingCollective>(*ranks, run.trace.internal);
    context.collective = collective.get();
  }
  mechanism->select_trainable(model);
  std::vector<at::Tensor> before = model.weights();
  context.step_done = [&](const sdk::StepReport& report, const sdk::StateWriter&) {
    std::string line = "step " + std::to_string(report.step) + "/" + std::to_string(report.total_steps) + " engine {";
    for (const auto& [key, value] : report.engine) {
      if (key != "seconds_per_example") line += key + ": " + value + "; ";  // timings: measured, not decided
    }
    run.trace.released.push_back(line + "}");
    const std::vector<at::Tensor> now = model.weights();
    std::vector<at::Tensor> update;
    for (std::size_t j = 0; j < now.size(); ++j) update.push_back(before[j] - now[j]);
    run.releases.push_back(update);
    before = now;
  };
  mechanism->run(context);
  for (const auto& w : model.weights()) run.trace.released.push_back("final weight " + shape_of(w));
  run.trace.released.push_back("ledger: " + std::to_string(ledger.steps()) + " steps in " +
                               std::to_string(ledger.entries().size()) + " entries, " +
                               std::to_string(ledger.caveats().size()) + " caveats");
  for (const auto& c : ledger.caveats()) run.trace.released.push_back("caveat: " + c);
  run.ledger = ledger.total().to_string();
  run.planned = mechanism->planned_events(data.size()).to_string();
  if (recording) run.recorded = recording->steps;
  return run;
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

/// A test-only seed whose first Poisson batch on N + 1 records (rate `q_with`) is the first batch
/// on N records (rate `q_without`) plus x (index N) — or without it, for x_in_batch = false. The
/// two rates differ when q = B / N (the engine's DP-SGD); for central images they are one q_c.
/// With `d_batch_empty`, D's first batch must also be empty (x alone in the batch of D ∪ {x}).
inline std::uint64_t replay_seed(std::int64_t n, double q_without, double q_with, bool x_in_batch,
                                 bool d_batch_empty = false) {
  for (std::uint64_t seed = 1; seed < 1000000; ++seed) {
    engine::PoissonSampler without(n, q_without,
                                   engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
    engine::PoissonSampler with(n + 1, q_with,
                                engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
    at::Tensor expected = without.next();
    if (d_batch_empty && expected.numel() > 0) continue;
    if (x_in_batch) expected = at::cat({expected, at::full({1}, n, at::kLong)});
    const at::Tensor got = with.next();
    if (got.sizes() == expected.sizes() && at::equal(got, expected)) return seed;
  }
  throw std::runtime_error("replay_seed: no seed found");
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
inline double ordered_fidelity(const std::vector<StageRun>& d, const std::vector<StageRun>& dx, double tolerance,
                               double& worst) {
  double x_norm = std::nan("");
  int extra = 0;
  worst = 0;
  for (std::size_t r = 0; r < d.size(); ++r) {
    const at::Tensor a = d[r].recorded[0].norms, b = dx[r].recorded[0].norms;
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

inline double check_fidelity(const std::string& what, const std::vector<StageRun>& d,
                             const std::vector<StageRun>& dx, double tolerance, Report& report) {
  std::vector<at::Tensor> parts, parts_x;
  for (const StageRun& r : d) {
    if (r.recorded.empty()) return std::nan("");
    parts.push_back(r.recorded[0].norms);
  }
  for (const StageRun& r : dx) {
    if (r.recorded.empty()) return std::nan("");
    parts_x.push_back(r.recorded[0].norms);
  }
  double worst = 0;
  const double in_order = ordered_fidelity(d, dx, tolerance, worst);
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

}  // namespace detail

/// Runs the audit: D, D ∪ {x_ref} and D ∪ {x} for each neighbour with identical randomness (x in
/// the first logical step's batch), then once more with x left out of the batch (the release must
/// then be the same). Returns every finding and the measured distances (in units of C).
inline Report audit_dp_sgd(const DpSgdAudit& a, const at::Tensor& images, const std::vector<Neighbour>& neighbours,
                           const Neighbour& reference) {
  Report report;
  const std::int64_t n = images.size(0);
  const ReplayData d(images);
  const double scale = static_cast<double>(a.batch_size) / a.lr;  // q N / lr: released update -> clipped sum + noise
  const std::uint64_t seed =
      replay_seed(n, sampling_rate(a.batch_size, n), sampling_rate(a.batch_size, n + 1), /*x_in_batch=*/true);
  const std::vector<StageRun> on_d = a.runner(a.mechanism, seed, a.model, d);
  const std::vector<StageRun> on_ref = a.runner(a.mechanism, seed, a.model, d.with(reference.image, reference.label));
  for (const Neighbour& x : neighbours) {
    const std::string what = a.name + ", x = " + x.name;
    const std::vector<StageRun> on_x = a.runner(a.mechanism, seed, a.model, d.with(x.image, x.label));
    const double x_norm = detail::check_fidelity(what, on_d, on_x, a.fidelity, report);
    distance_between(what + ", released update", on_d[0].releases.front(), on_x[0].releases.front(), scale,
                     a.max_grad_norm, a.relative_slack, 0.0, report, x_norm);
    const auto sum_d = detail::summed_over_ranks(on_d, 0), sum_x = detail::summed_over_ranks(on_x, 0);
    if (!sum_d.empty()) {
      distance_between(what + ", clipped sum before noise", sum_d, sum_x, 1.0, a.max_grad_norm, a.relative_slack, 0.0,
                       report);
    }
    detail::check_structure(what, on_d, on_x, on_ref, report);
  }
  // x alone in the batch: D's step is pure noise (an empty batch), D ∪ {x}'s is x's clipped gradient
  // plus the same noise.
  if (!neighbours.empty() && a.check_alone) {
    const std::uint64_t alone_seed = replay_seed(n, sampling_rate(a.batch_size, n), sampling_rate(a.batch_size, n + 1),
                                                 /*x_in_batch=*/true, /*d_batch_empty=*/true);
    const Neighbour& x = neighbours.front();
    const std::string what = a.name + ", x = " + x.name + " alone in the batch";
    const std::vector<StageRun> empty = a.runner(a.mechanism, alone_seed, a.model, d);
    const std::vector<StageRun> alone = a.runner(a.mechanism, alone_seed, a.model, d.with(x.image, x.label));
    const double x_norm = detail::check_fidelity(what, empty, alone, a.fidelity, report);
    distance_between(what + ", released update", empty[0].releases.front(), alone[0].releases.front(), scale,
                     a.max_grad_norm, a.relative_slack, 0.0, report, x_norm);
    for (std::size_t r = 0; r < alone.size(); ++r) {
      report.add(first_difference(what + ": a released count, shape or decision depends on x's presence",
                                  empty[r].trace.released, alone[r].trace.released));
    }
  }
  // x in the data set but not in the batch: only the public N has changed.
  if (!neighbours.empty()) {
    const std::uint64_t out_seed =
        replay_seed(n, sampling_rate(a.batch_size, n), sampling_rate(a.batch_size, n + 1), /*x_in_batch=*/false);
    const std::string what = a.name + ", x = " + neighbours.front().name + " not in the batch";
    const std::vector<StageRun> without = a.runner(a.mechanism, out_seed, a.model, d);
    const std::vector<StageRun> with = a.runner(a.mechanism, out_seed, a.model, d.with(neighbours.front().image));
    distance_between(what + ", released update", without[0].releases.front(), with[0].releases.front(), scale, 0.0,
                     0.0, 1e-9 * a.max_grad_norm, report);
  }
  return report;
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

/// Extreme but finite records for a 1x4x4 model, plus typical random ones; `magnitude` sets how
/// far out the extreme pixels go.
inline std::vector<Neighbour> adversarial_neighbours(double magnitude, int random_ones = 3) {
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  std::vector<Neighbour> xs;
  xs.push_back({"every pixel +" + std::to_string(static_cast<long long>(magnitude)), at::full({1, 4, 4}, magnitude, opt)});
  xs.push_back({"every pixel -" + std::to_string(static_cast<long long>(magnitude)), at::full({1, 4, 4}, -magnitude, opt)});
  const at::Tensor checker = (at::arange(16, opt).remainder(2) * 2 - 1).reshape({1, 4, 4}) * magnitude;
  xs.push_back({"checkerboard +-" + std::to_string(static_cast<long long>(magnitude)), checker});
  at::Tensor hot = at::zeros({1, 4, 4}, opt);
  hot[0][1][2] = magnitude;
  xs.push_back({"one hot pixel", hot});
  xs.push_back({"all zero", at::zeros({1, 4, 4}, opt)});
  for (int i = 0; i < random_ones; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + i);
    xs.push_back({"random " + std::to_string(i + 1), at::rand({1, 4, 4}, gen, opt) * 2 - 1});
  }
  return xs;
}

/// A typical record: what the adversarial ones are compared with for content independence.
inline Neighbour typical_reference() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
  return {"typical reference", at::rand({1, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1};
}

/// N records uniform in [-1, 1].
inline at::Tensor random_images(std::int64_t n, std::uint64_t seed = 7) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::rand({n, 1, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1;
}

// ---------------------------------------------------------------------------------------------
// Central images (DP-FETA): the queries and whole releases

/// One mean query's release from a subsample (engine::central_mean, or a planted bug).
using MeanQuery = std::function<at::Tensor(const at::Tensor& sampled, const at::Tensor& labels,
                                           const std::vector<double>& class_sizes,
                                           const engine::CentralImageOptions&, engine::GaussianNoise&)>;
/// One mode query's release (engine::central_mode, or a planted bug).
using ModeQuery = std::function<at::Tensor(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                           const engine::CentralImageOptions&, engine::GaussianNoise&)>;

/// The mean query on a subsample and on it plus x (x: [C, r, r] in [0, 1]), with the same noise:
/// per class, (release(D + x) - release(D)) times the public divisor q N_class is x's image in x's
/// class and zero elsewhere: its L2 norm must be at most Delta = sqrt(C r^2), and no other class's
/// release may move (the per-class parallel composition the event assumes).
inline Report audit_central_mean(const MeanQuery& query, const engine::CentralImageOptions& o, const at::Tensor& sampled,
                                 const at::Tensor& labels, const std::vector<double>& class_sizes,
                                 const std::vector<Neighbour>& neighbours, std::uint64_t noise_seed) {
  Report report;
  const double delta = engine::central_mean_sensitivity(sampled.size(1), sampled.size(2));
  const auto classes = static_cast<std::int64_t>(class_sizes.size());
  const at::Tensor divisor = at::tensor(class_sizes, at::kDouble).view({classes, 1, 1, 1}) * o.sampling_rate;
  auto noise = engine::GaussianNoise::seeded(noise_seed);
  const at::Tensor on_d = query(sampled, labels, class_sizes, o, noise);
  for (const Neighbour& x : neighbours) {
    const std::string what = "central mean query, x = " + x.name;
    auto same_noise = engine::GaussianNoise::seeded(noise_seed);
    const at::Tensor on_x = query(at::cat({sampled, x.image.to(sampled.scalar_type()).unsqueeze(0)}),
                                  at::cat({labels, at::full({1}, x.label, at::kLong)}), class_sizes, o, same_noise);
    distance_between(what, {on_d * divisor}, {on_x * divisor}, 1.0, delta, 1e-9, 0.0, report,
                     x.image.to(at::kDouble).norm().item<double>());
    if (on_d.sizes() == on_x.sizes()) {
      for (std::int64_t c = 0; c < classes; ++c) {
        if (c != x.label && !at::equal(on_d[c], on_x[c])) {
          report.add(what + ": the release of class " + std::to_string(c) + " moved, though x is in class " +
                     std::to_string(x.label));
        }
      }
    }
  }
  return report;
}

/// The per-pixel histograms the mode query declares: counts[class, pixel, bin] of p in `bins`
/// equal bins over [0, 1] (the top edge in the last bin).
inline at::Tensor declared_histograms(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                      std::int64_t bins) {
  const at::Tensor p = sampled.to(at::kDouble).flatten(1);
  const std::int64_t dims = p.size(1);
  at::Tensor counts = at::zeros({classes, dims, bins}, at::kDouble);
  for (std::int64_t i = 0; i < p.size(0); ++i) {
    const std::int64_t c = labels[i].item<std::int64_t>();
    for (std::int64_t j = 0; j < dims; ++j) {
      const auto b = std::min<std::int64_t>(bins - 1, static_cast<std::int64_t>(std::floor(p[i][j].item<double>() * bins)));
      counts[c][j][b] += 1;
    }
  }
  return counts;
}

/// The mode query on a subsample and on it plus x, with the same noise. The release is a noisy
/// argmax, so the harness replays the declared noise (the query's first draw of the seeded
/// stream: N(0, (sigma sqrt(d))^2) per count) over the declared histograms and checks:
///  - fidelity: release(D) is the argmax of D's histograms plus that noise;
///  - sensitivity: on D + x only x's class moves, each pixel only to x's bin, and only where x's one
///    count (the declared per-histogram sensitivity 1, L2 sqrt(d) over the d pixels) can make that
///    bin win: the count a flip implies, max_k(n_k + z_k) - (n_b + z_b), is at most 1.
inline Report audit_central_mode(const ModeQuery& query, const engine::CentralImageOptions& o, const at::Tensor& sampled,
                                 const at::Tensor& labels, std::int64_t classes,
                                 const std::vector<Neighbour>& neighbours, std::uint64_t noise_seed) {
  Report report;
  const std::int64_t dims = sampled[0].numel(), bins = o.bins;
  const at::Tensor counts = declared_histograms(sampled, labels, classes, bins);
  const at::Tensor z = engine::GaussianNoise::seeded(noise_seed)
                           .sample(at::zeros({classes * dims * bins}, at::kDouble),
                                   o.noise_multiplier * std::sqrt(static_cast<double>(dims)))
                           .view({classes, dims, bins});
  const at::Tensor noisy = counts + z;
  auto winners = [&](const at::Tensor& release) {  // midpoints -> bin indices [classes, dims]
    return (release.to(at::kDouble).reshape({classes, dims}) * bins - 0.5).round().to(at::kLong);
  };
  auto noise = engine::GaussianNoise::seeded(noise_seed);
  const at::Tensor on_d = winners(query(sampled, labels, classes, o, noise));
  if (!at::equal(on_d, noisy.argmax(2))) {
    report.add("central mode query: the release on D is not the noisy argmax of the declared histograms (" +
               std::to_string(on_d.ne(noisy.argmax(2)).sum().item<std::int64_t>()) +
               " pixels differ): the counts or the noise are not what the mechanism declares");
  }
  for (const Neighbour& x : neighbours) {
    const std::string what = "central mode query, x = " + x.name;
    auto same_noise = engine::GaussianNoise::seeded(noise_seed);
    const at::Tensor on_x = winners(query(at::cat({sampled, x.image.to(sampled.scalar_type()).unsqueeze(0)}),
                                          at::cat({labels, at::full({1}, x.label, at::kLong)}), classes, o, same_noise));
    const at::Tensor x_bins =
        (x.image.to(at::kDouble).flatten() * bins).floor().clamp(0, bins - 1).to(at::kLong);  // [dims]
    double implied = 0;
    std::int64_t flips = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      for (std::int64_t j = 0; j < dims; ++j) {
        const std::int64_t before = on_d[c][j].item<std::int64_t>(), after = on_x[c][j].item<std::int64_t>();
        if (before == after) continue;
        if (c != x.label) {
          report.add(what + ": class " + std::to_string(c) + " pixel " + std::to_string(j) + " moved, though x is in class " +
                     std::to_string(x.label));
          continue;
        }
        if (after != x_bins[j].item<std::int64_t>()) {
          report.add(what + ": pixel " + std::to_string(j) + " moved to bin " + std::to_string(after) +
                     ", where x does not fall");
          continue;
        }
        ++flips;
        implied = std::max(implied, noisy[c][j].max().item<double>() - noisy[c][j][after].item<double>());
      }
    }
    report.measurements.push_back({what + " (" + std::to_string(flips) + " pixels flipped)", implied, 1.0, std::nan("")});
    if (implied > 1 + 1e-9) {
      report.add(what + ": a pixel's mode moved to x's bin where that takes " + std::to_string(implied) +
                 " counts, more than x's one count per pixel histogram (L2 sensitivity sqrt(d))");
    }
  }
  return report;
}

/// Whole releases (release_central_images or the central_images mechanism) on D (N records) and
/// D ∪ {x}: the same number of images, shapes and labels; per query and class, for the mean (with
/// post_process off, resolution = the image size and noise too small to clamp, so the release
/// inverts to p = (image + 1) / 2), (p' q (N + 1) / classes - p q N / classes) has L2 norm at most
/// Delta over each query, and is zero outside x's class; for the mode, only x's class moves, and
/// only to x's bins.
inline Report compare_central_releases(const std::string& name, const engine::CentralImageOptions& o,
                                       const engine::CentralImages& d, const engine::CentralImages& dx,
                                       const Neighbour& x, std::int64_t n, std::int64_t classes) {
  Report report;
  const std::string what = name + ", x = " + x.name;
  if (d.images.sizes() != dx.images.sizes() || d.images.scalar_type() != dx.images.scalar_type()) {
    report.add(what + ": released " + shape_of(d.images) + " on D, " + shape_of(dx.images) + " on D + x");
    return report;
  }
  if (!at::equal(d.labels, dx.labels)) report.add(what + ": the released labels differ");
  const std::int64_t queries = d.images.size(0) / classes;
  const at::Tensor p = (d.images.to(at::kDouble) + 1) / 2, px = (dx.images.to(at::kDouble) + 1) / 2;
  if (o.statistic == engine::CentralStatistic::mean) {
    const double delta = engine::central_mean_sensitivity(d.images.size(1), o.resolution);
    const double div = o.sampling_rate * static_cast<double>(n) / static_cast<double>(classes);
    const double div_x = o.sampling_rate * static_cast<double>(n + 1) / static_cast<double>(classes);
    for (std::int64_t q = 0; q < queries; ++q) {
      const at::Tensor sums = p.narrow(0, q * classes, classes) * div, sums_x = px.narrow(0, q * classes, classes) * div_x;
      distance_between(what + ", query " + std::to_string(q), {sums}, {sums_x}, 1.0, delta, 1e-4, 0.0, report);
      for (std::int64_t c = 0; c < classes; ++c) {
        if (c != x.label && !at::allclose(sums[c], sums_x[c], 1e-5, 1e-5)) {
          report.add(what + ", query " + std::to_string(q) + ": class " + std::to_string(c) + " moved");
        }
      }
    }
  } else {
    const at::Tensor x_mid = ((x.image.to(at::kDouble) + 1) / 2 * o.bins).floor().clamp(0, o.bins - 1).add(0.5) / o.bins;
    for (std::int64_t q = 0; q < queries; ++q) {
      for (std::int64_t c = 0; c < classes; ++c) {
        const at::Tensor a = p[q * classes + c], b = px[q * classes + c];
        const at::Tensor moved = (a - b).abs() > 1e-5;
        if (c == x.label) {
          report.measurements.push_back({what + ", query " + std::to_string(q) + ": pixels whose mode moved",
                                         moved.sum().item<double>(), static_cast<double>(a.numel()), std::nan("")});
        }
        if (!moved.any().item<bool>()) continue;
        if (c != x.label) {
          report.add(what + ", query " + std::to_string(q) + ": class " + std::to_string(c) + " moved");
        } else if (!((b - x_mid).abs() < 1e-5).masked_select(moved).all().item<bool>()) {
          report.add(what + ", query " + std::to_string(q) + ": a pixel moved to a bin where x does not fall");
        }
      }
    }
  }
  return report;
}

}  // namespace privdiff::testing::replay
