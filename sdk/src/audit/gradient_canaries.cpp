#include <privdiff/audit/gradient_canaries.hpp>

#include <privdiff/check/replay_models.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/privacy/calibration.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace privdiff::sdk::audit {

namespace {

// Two bias-free per-example Linear layers over the two halves of the input; loss = w . x, K equal
// rows per example, so each example's gradient is its input. Starts at zero.
class CanaryModel : public Model {
 public:
  explicit CanaryModel(std::int64_t dims) : net_(std::make_shared<torch::nn::Module>()), half_(dims / 2) {
    first_ = net_->register_module("first", std::make_shared<engine::Linear>(half_, 1, false));
    second_ = net_->register_module("second", std::make_shared<engine::Linear>(dims - half_, 1, false));
    torch::NoGradGuard no_grad;
    first_->weight.zero_();
    second_->weight.zero_();
  }
  torch::nn::Module& module() override { return *net_; }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor&, const Conditioning&) override { return x; }
  std::vector<ParameterInfo> parameters_with_roles() override {
    return {{"first.weight", "io", -1, first_->weight}, {"second.weight", "io", -1, second_->weight}};
  }
  std::vector<std::int64_t> sample_shape() const override { return {1, 1, half_ * 2}; }
  at::Tensor training_loss(const at::Tensor& images, const Conditioning&, std::int64_t k, at::Generator&) override {
    // K rows per example, example-major, as the engine expects of every layer's input.
    const at::Tensor x = images.flatten(1).repeat_interleave(k, 0);
    const at::Tensor rows = first_->forward(x.narrow(1, 0, half_)) + second_->forward(x.narrow(1, half_, x.size(1) - half_));
    return rows.squeeze(1);
  }
  // Both layers' weights as one vector over the input coordinates.
  at::Tensor weights() const { return at::cat({first_->weight.detach().flatten(), second_->weight.detach().flatten()}); }

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::int64_t half_;
  std::shared_ptr<engine::Linear> first_, second_;
};

class CanaryData : public Dataset {
 public:
  explicit CanaryData(at::Tensor inputs) : inputs_(std::move(inputs)) {}
  std::int64_t size() const override { return inputs_.size(0); }
  at::Tensor images(const at::Tensor& idx) const override { return inputs_.index_select(0, idx); }
  at::Tensor labels(const at::Tensor& idx) const override { return at::zeros({idx.numel()}, at::kLong); }
  std::int64_t num_classes() const override { return 1; }
  bool is_public() const override { return false; }
  std::string name() const override { return "gradient canaries"; }

 private:
  at::Tensor inputs_;  // [N, 1, 1, dims]
};

constexpr std::int64_t filler_dims = 64;  // coordinates only fillers use
constexpr std::int64_t filler_side = 8;   // filler_dims = filler_side^2

// The mechanism's public data as canary-model examples: each image's channels averaged and area-averaged
// to 8x8 (check::StandInPublicData), scaled to norm C, on the fillers' coordinates; zero on the canaries'.
class CanaryPublicData : public Dataset {
 public:
  CanaryPublicData(const Dataset& data, std::int64_t canaries, double norm)
      : small_(data, filler_side), canaries_(canaries), norm_(norm) {}
  std::int64_t size() const override { return small_.size(); }
  at::Tensor images(const at::Tensor& idx) const override {
    const at::Tensor x = small_.images(idx).flatten(1);
    const at::Tensor scaled = x / x.norm(2, 1, true).clamp_min(1e-12) * norm_;
    at::Tensor out = at::zeros({x.size(0), canaries_ + filler_dims}, at::kFloat);
    out.narrow(1, canaries_, filler_dims).copy_(scaled);
    return out.view({x.size(0), 1, 1, canaries_ + filler_dims});
  }
  at::Tensor labels(const at::Tensor& idx) const override { return small_.labels(idx); }
  std::int64_t num_classes() const override { return small_.num_classes(); }
  bool is_public() const override { return small_.is_public(); }
  std::string name() const override { return small_.name() + " (on the canary model's filler coordinates)"; }

 private:
  check::StandInPublicData small_;
  std::int64_t canaries_;
  double norm_;
};

}  // namespace

GradientCanaryAudit audit_with_gradient_canaries(engine::DpSgdOptions options, const Accountant& accountant,
                                                 double target_epsilon, double delta,
                                                 const GradientCanaryOptions& audit, const DpSgdFactory& factory,
                                                 const Auditor* auditor) {
  if (!options.is_private) throw std::invalid_argument("gradient canary audit: the options are not private");
  check::MechanismSettings settings;
  settings.steps = 0;  // the options' own length (steps, or epochs of the canary data)
  settings.noise_multiplier = options.noise_multiplier;
  if (!options.secure_noise) settings.seed = options.seed.value_or(audit.seed);
  settings.physical_batch_size = options.physical_batch_size;
  const check::MechanismUnderTest make = [options, factory](const check::MechanismSettings& s) -> std::unique_ptr<Mechanism> {
    const engine::DpSgdOptions o = check::options_for_check(options, s);
    if (factory) return factory(o);
    return std::make_unique<engine::DpSgdMechanism>(o);
  };
  return audit_with_gradient_canaries(make, settings, options.max_grad_norm, accountant, target_epsilon, delta, audit,
                                      auditor);
}

GradientCanaryAudit audit_with_gradient_canaries(const check::MechanismUnderTest& make, check::MechanismSettings settings,
                                                 double max_grad_norm, const Accountant& accountant,
                                                 double target_epsilon, double delta,
                                                 const GradientCanaryOptions& audit, const Auditor* auditor) {
  if (audit.canaries < 2) throw std::invalid_argument("gradient canary audit: need at least 2 canaries");
  if (audit.fillers < 0) throw std::invalid_argument("gradient canary audit: fillers must be >= 0");
  if (!(audit.canary_norm > 0)) throw std::invalid_argument("gradient canary audit: canary_norm must be > 0");
  if (!(audit.sampling_rate > 0 && audit.sampling_rate <= 1)) {
    throw std::invalid_argument("gradient canary audit: sampling_rate must be in (0, 1]");
  }
  const double c = max_grad_norm;
  // Placement and inclusion: canary i on coordinate place[i]; fillers on the last filler_dims.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(audit.seed);
  const std::int64_t m = audit.canaries, dims = m + filler_dims;
  const at::Tensor place = at::randperm(m, gen, at::kLong);  // canary coordinates, both layers
  const at::Tensor coin = at::rand({m}, gen, at::kDouble).lt(0.5);
  const at::Tensor in = coin.nonzero().flatten();
  const std::int64_t kept = in.numel(), n = kept + audit.fillers;
  if (n == 0) throw std::invalid_argument("gradient canary audit: the dataset came out empty");
  at::Tensor inputs = at::zeros({n, dims}, at::kFloat);
  inputs.index_put_({at::arange(kept, at::kLong), place.index_select(0, in)}, audit.canary_norm * c);
  if (audit.fillers > 0) {
    // Random directions with norms spread over [C / 2, 2 C]: some are clipped, some not.
    at::Tensor f = at::randn({audit.fillers, filler_dims}, gen, at::kDouble);
    f = f / f.norm(2, 1, true) * (at::rand({audit.fillers, 1}, gen, at::kDouble) * 1.5 + 0.5) * c;
    inputs.narrow(0, kept, audit.fillers).narrow(1, m, filler_dims).copy_(f.to(at::kFloat));
  }
  CanaryData data(inputs.view({n, 1, 1, dims}));
  CanaryModel model(dims);
  settings.batch_size = std::max<std::int64_t>(1, std::llround(audit.sampling_rate * static_cast<double>(n)));
  std::unique_ptr<Mechanism> mechanism = make(settings);
  if (!mechanism->is_private()) throw std::invalid_argument("gradient canary audit: the mechanism is not private");
  if (mechanism->needs_calibration()) {
    const NoiseCalibration calibrated = calibrate_noise_multiplier(
        accountant, [&](double sigma) { return mechanism->planned_events_with(sigma, n); }, target_epsilon, delta);
    mechanism->set_noise_multiplier(calibrated.noise_multiplier);
  }
  PrivacyLedger ledger;
  StageContext context{model, data, ledger, audit.seed, {}};
  std::optional<CanaryPublicData> public_data;
  if (audit.public_data) context.public_data = &public_data.emplace(*audit.public_data, m, c);
  mechanism->run(context);

  GradientCanaryAudit result;
  result.delta = delta;
  result.noise_multiplier = mechanism->noise_multiplier().value_or(0.0);
  result.dataset_size = n;
  result.steps = ledger.steps();
  // theta_0 = 0 and lr = 1: minus the final weights is the sum of every released noisy gradient.
  const at::Tensor sums = -model.weights().to(at::kDouble).index_select(0, place);
  const auto* s = sums.contiguous().data_ptr<double>();
  const auto* inc = coin.contiguous().data_ptr<bool>();
  result.scores.assign(s, s + m);
  result.included.assign(inc, inc + m);
  result.bound = auditor ? auditor->lower_bound(result.scores, result.included, delta, audit.confidence)
                         : audit_canary_scores(result.scores, result.included, delta, audit.confidence);
  const PrivacyEvent spent = ledger.total();
  result.reported_epsilon = accountant.cannot_evaluate(spent).empty() ? accountant.epsilon(spent, delta).epsilon
                                                                       : std::numeric_limits<double>::infinity();
  return result;
}

}  // namespace privdiff::sdk::audit
