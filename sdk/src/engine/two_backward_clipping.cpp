// The clipped sum with two backward passes and no output gradient held (fast_gradient_clipping.hpp,
// ClipPasses::two): the norms are taken in the first backward as each layer output's gradient
// arrives (CaptureSession taps), the clipped sums in a replay of the same graph.
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/per_example_rows.hpp>
#include <privdiff/engine/precision.hpp>

#include "clipped_sum_parts.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

// cuDNN's deterministic algorithms for both passes, so that the replay's output gradients are the
// first pass's bit for bit (checked: ReplayCheck); the setting is given back afterwards.
class DeterministicCudnnScope {
 public:
  DeterministicCudnnScope() : before_(at::globalContext().deterministicCuDNN()) {
    at::globalContext().setDeterministicCuDNN(true);
  }
  ~DeterministicCudnnScope() { at::globalContext().setDeterministicCuDNN(before_); }
  DeterministicCudnnScope(const DeterministicCudnnScope&) = delete;
  DeterministicCudnnScope& operator=(const DeterministicCudnnScope&) = delete;

 private:
  bool before_;
};

// Each example's fingerprint of one output gradient ([n, 2], float64): its norm, and the sum of its
// values' bits read as integers (a change too small to move the norm moves the bits). The replay's
// gradient must match it exactly, or the sums would not be those of the norms' gradients.
at::Tensor fingerprint(const at::Tensor& g, std::int64_t n) {
  const at::Tensor rows = g.reshape({n, -1}).contiguous();
  const at::Tensor bits = rows.view(rows.element_size() == 2 ? at::kShort : at::kInt).to(at::kLong).sum(1);
  return at::stack({at::linalg_vector_norm(rows, 2, {1}, false, at::kDouble), bits.to(at::kDouble)}, 1);
}

// Both passes' state. Pass 1 (norms): each call's per-example squared norms into one column per
// parameter; the per-example gradients a strategy formed anyway are kept (within `budget`) and
// summed with the clip factors directly, as are those of layers called more than once or sharing a
// parameter (their norm is that of a sum of calls). Pass 2 (sums): the other calls' clipped sums
// from the replayed output gradient, each call's captured input released once summed.
class TwoPassSink : public OutputGradientSink {
 public:
  static constexpr std::int64_t budget = std::int64_t{256} << 20;

  TwoPassSink(std::vector<at::Tensor> params, std::int64_t n, std::int64_t group, NormPlanner& planner)
      : params_(std::move(params)), n_(n), group_(group), planner_(planner) {
    for (std::size_t j = 0; j < params_.size(); ++j) index_[params_[j].unsafeGetTensorImpl()] = static_cast<std::int64_t>(j);
    columns_.resize(params_.size());
    sums_.resize(params_.size());
  }

  void start(std::vector<CapturedCall> calls);
  void on_output_gradient(std::size_t c, const at::Tensor& gradient) override;
  // After pass 1: the clip factors, and the sums of what pass 1 kept.
  at::Tensor finish_norms(double max_grad_norm, ClipMode mode, const ClipRule& rule, at::Tensor& squared);
  bool needs_replay() const { return !replayed_.empty(); }
  void start_replay() { replay_ = true; }
  // After pass 2: every call summed, its gradient the one its norm was taken from.
  void check_replay();
  std::vector<at::Tensor> sums();

 private:
  std::int64_t position(const at::Tensor& p) const { return index_.at(p.unsafeGetTensorImpl()); }
  bool owns_its_norms(PerExampleLayer* layer) const;
  void take_norms(std::size_t c, const at::Tensor& g);
  void add_sum(std::size_t c, const at::Tensor& g);
  void add_to_column(std::int64_t p, std::int64_t start, const at::Tensor& values);
  void add_to_sum(std::int64_t p, at::Tensor value);
  at::Tensor factors_of(std::int64_t p) const { return mode_ == ClipMode::flat ? factors_ : factors_.select(1, p); }

  std::vector<at::Tensor> params_;
  std::int64_t n_, group_;
  NormPlanner& planner_;
  std::map<const void*, std::int64_t> index_;
  std::vector<CapturedCall> calls_;
  std::map<PerExampleLayer*, int> calls_per_layer_;
  std::map<std::int64_t, int> owners_;                  // parameter -> layers using it
  std::vector<at::Tensor> columns_, sums_;
  std::map<std::size_t, std::vector<std::pair<std::int64_t, std::vector<at::Tensor>>>> kept_;  // call -> (start, grads)
  std::int64_t kept_bytes_ = 0;
  std::map<std::int64_t, at::Tensor> shared_;           // parameter -> summed per-example gradient
  std::map<std::size_t, at::Tensor> fingerprints_;      // call -> pass 1's fingerprint
  std::set<std::size_t> replayed_;                      // calls summed in pass 2
  at::Tensor mismatch_;                                 // any replayed fingerprint that differs
  bool replay_ = false;
  ClipMode mode_ = ClipMode::flat;
  at::Tensor factors_, finite_;
  bool all_finite_ = true;
};

void TwoPassSink::start(std::vector<CapturedCall> calls) {
  calls_ = std::move(calls);
  for (const auto& call : calls_) {
    detail::check_output_unchanged(call);
    // One device: autograd runs each device's nodes on its own thread, and the sink takes no lock.
    if (call.output.device() != calls_.front().output.device()) {
      throw std::invalid_argument("two-backward clipping: the layer outputs are on more than one device; set the "
                                  "stage's clip_passes = \"one\"");
    }
    if (++calls_per_layer_[call.layer] == 1) {
      for (const auto& p : call.layer->trainable_parameters()) ++owners_[position(p)];
    }
  }
  for (auto& call : calls_) call.output = at::Tensor();  // checked: the graph holds what it needs
}

bool TwoPassSink::owns_its_norms(PerExampleLayer* layer) const {
  if (calls_per_layer_.at(layer) != 1) return false;
  for (const auto& p : layer->trainable_parameters()) {
    if (owners_.at(position(p)) != 1) return false;
  }
  return true;
}

void TwoPassSink::on_output_gradient(std::size_t c, const at::Tensor& gradient) {
  at::NoGradGuard no_grad;
  const StrictFloat32Scope strict;  // norms and sums rounded alike: no TF32 (precision.hpp)
  if (!replay_) {
    RECORD_USER_SCOPE("privdiff::norms_in_backward");
    take_norms(c, detail::in_parameter_type(calls_[c], gradient));
    if (replayed_.count(c)) fingerprints_[c] = fingerprint(gradient, n_);
    return;
  }
  if (!replayed_.count(c)) return;  // summed in pass 1
  RECORD_USER_SCOPE("privdiff::sums_in_replay");
  // Only the examples summed matter: the others' rows are zeroed (and may be NaN in both passes).
  const at::Tensor differs = (fingerprint(gradient, n_) != fingerprints_.at(c)).any(1).logical_and(finite_).any();
  mismatch_ = mismatch_.defined() ? mismatch_.logical_or(differs) : differs;
  add_sum(c, detail::in_parameter_type(calls_[c], gradient));
}

void TwoPassSink::add_to_column(std::int64_t p, std::int64_t start, const at::Tensor& values) {
  at::Tensor& column = columns_[static_cast<std::size_t>(p)];
  if (!column.defined()) column = at::zeros({n_}, values.options().dtype(at::kDouble));
  column.narrow(0, start, values.size(0)).add_(values);
}

void TwoPassSink::add_to_sum(std::int64_t p, at::Tensor value) {
  at::Tensor& slot = sums_[static_cast<std::size_t>(p)];
  if (slot.defined()) slot.add_(value);
  else slot = std::move(value);
}

void TwoPassSink::take_norms(std::size_t c, const at::Tensor& g) {
  // A bf16 forward's input in the parameters' dtype, for this pass only (kept, it would double the
  // memory of every call waiting for the replay).
  CapturedCall call = calls_[c];
  call.saved = detail::in_parameter_type(call, call.saved);
  const auto layer_params = call.layer->trainable_parameters();
  if (!owns_its_norms(call.layer)) {  // its norm is that of a sum: the gradients, summed over calls
    auto per_example = call.layer->per_example(call, g, group_);
    for (std::size_t j = 0; j < layer_params.size(); ++j) {
      auto [it, first] = shared_.emplace(position(layer_params[j]), per_example[j]);
      if (!first) it->second.add_(per_example[j]);
    }
    calls_[c].saved = at::Tensor();
    return;
  }
  const std::int64_t slice = detail::norm_slice(g.device(), n_);
  const std::int64_t bytes = detail::gradient_bytes(layer_params, n_);
  bool keep = kept_bytes_ + bytes <= budget;
  std::vector<std::pair<std::int64_t, std::vector<at::Tensor>>> kept;
  for (std::int64_t start = 0; start < n_; start += slice) {
    const std::int64_t len = std::min(slice, n_ - start);
    const CapturedCall part{call.layer, call.saved.narrow(0, start * group_, len * group_), call.output, call.output_version};
    std::vector<at::Tensor> gradients;
    const auto norms = planner_.squared_norms(*call.layer, part, g.narrow(0, start * group_, len * group_), group_,
                                              keep ? &gradients : nullptr);
    for (std::size_t j = 0; j < layer_params.size(); ++j) add_to_column(position(layer_params[j]), start, norms[j]);
    keep = keep && !gradients.empty();
    if (keep) kept.emplace_back(start, std::move(gradients));
  }
  if (!keep) {
    replayed_.insert(c);
    return;
  }
  kept_bytes_ += bytes;
  kept_[c] = std::move(kept);
  calls_[c].saved = at::Tensor();  // summed from what is kept: the input is not needed again
}

at::Tensor TwoPassSink::finish_norms(double max_grad_norm, ClipMode mode, const ClipRule& rule, at::Tensor& squared) {
  at::NoGradGuard no_grad;
  const StrictFloat32Scope strict;
  mode_ = mode;
  const auto doubles = at::TensorOptions(at::kDouble).device(params_.front().device());
  for (const auto& [p, g] : shared_) add_to_column(p, 0, squared_norms_of(g));
  for (auto& column : columns_) {
    if (!column.defined()) column = at::zeros({n_}, doubles);  // parameters that did not reach the loss
  }
  squared = at::stack(columns_, 1);
  factors_ = clip_factors(squared, max_grad_norm, mode, rule);
  finite_ = finite_examples(squared);
  all_finite_ = finite_.all().item<bool>();
  // Rows of examples whose norm is not finite are zeroed, not scaled: 0 times infinity is NaN.
  auto weighted = [&](const at::Tensor& per_example, std::int64_t p, std::int64_t start) {
    at::Tensor rows = per_example.reshape({per_example.size(0), -1});
    if (!all_finite_) rows = rows.masked_fill(finite_.narrow(0, start, rows.size(0)).logical_not().unsqueeze(1), 0);
    const at::Tensor f = factors_of(p).narrow(0, start, rows.size(0)).to(rows.scalar_type());
    const at::Tensor& param = params_[static_cast<std::size_t>(p)];
    return at::matmul(f.unsqueeze(0), rows).reshape(param.sizes()).to(param.scalar_type());
  };
  for (const auto& [c, slices] : kept_) {
    const auto layer_params = calls_[c].layer->trainable_parameters();
    for (const auto& [start, gradients] : slices) {
      for (std::size_t j = 0; j < layer_params.size(); ++j) {
        const std::int64_t p = position(layer_params[j]);
        add_to_sum(p, weighted(gradients[j], p, start));
      }
    }
  }
  for (const auto& [p, g] : shared_) add_to_sum(p, weighted(g, p, 0));
  kept_.clear();
  shared_.clear();
  return factors_;
}

void TwoPassSink::add_sum(std::size_t c, const at::Tensor& g) {
  CapturedCall call = calls_[c];
  call.saved = detail::in_parameter_type(call, call.saved);
  const auto layer_params = call.layer->trainable_parameters();
  std::vector<at::Tensor> scales;
  for (const auto& p : layer_params) scales.push_back(factors_of(position(p)));
  at::Tensor output_grad = g;
  if (!all_finite_) {
    call.saved = zero_examples_not_kept(call.saved, finite_, group_);
    output_grad = zero_examples_not_kept(output_grad, finite_, group_);
  }
  auto sums = call.layer->scaled_sum(call, output_grad, group_, scales);
  for (std::size_t j = 0; j < sums.size(); ++j) add_to_sum(position(layer_params[j]), std::move(sums[j]));
  calls_[c].saved = at::Tensor();
  replayed_.erase(c);
}

void TwoPassSink::check_replay() {
  if (!replayed_.empty()) {
    throw std::logic_error("two-backward clipping: " + std::to_string(replayed_.size()) +
                           " layer call(s) got no gradient in the replay of the backward pass");
  }
  if (mismatch_.defined() && mismatch_.item<bool>()) {
    throw ReplayMismatch(
        "two-backward clipping: the replayed backward pass gave a layer output gradient that differs from the "
        "first pass's (a kernel that is not deterministic), so the clipped sums would not be those of the norms "
        "taken; nothing was summed; set the stage's clip_passes = \"one\"");
  }
}

std::vector<at::Tensor> TwoPassSink::sums() {
  for (std::size_t j = 0; j < params_.size(); ++j) {
    if (!sums_[j].defined()) sums_[j] = at::zeros_like(params_[j], params_[j].options().requires_grad(false));
  }
  return std::move(sums_);
}

}  // namespace

ClipPasses clip_passes_from_string(const std::string& name) {
  if (name == "one") return ClipPasses::one;
  if (name == "two") return ClipPasses::two;
  throw std::invalid_argument("clip passes must be \"one\" or \"two\", got \"" + name + "\"");
}

std::string to_string(ClipPasses passes) { return passes == ClipPasses::two ? "two" : "one"; }

ClippedSum clipped_gradient_sum_two_passes(torch::nn::Module& model, const RowLoss& loss, std::int64_t n,
                                           std::int64_t group, double max_grad_norm, ClipMode mode,
                                           NormPlanner& planner, const ClipRule& rule) {
  if (!(max_grad_norm > 0)) throw std::invalid_argument("max_grad_norm must be > 0");
  if (!has_closed_form(model) || n == 0) {
    return clipped_gradient_sum(model, loss, n, group, max_grad_norm, mode, planner, rule);
  }
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto start = Clock::now();
  const auto sink = std::make_shared<TwoPassSink>(trainable_parameters(model), n, group, planner);
  at::Tensor total, probe;
  {
    CaptureSession session(sink);
    total = example_means(loss(at::arange(n, at::kLong)), n, group).sum();
    sink->start(session.calls());
    probe = session.probe();
  }
  ClippedSum out;
  out.seconds["forward"] = since(start);
  start = Clock::now();
  const DeterministicCudnnScope deterministic;
  {
    RECORD_USER_SCOPE("privdiff::backward_with_norms");
    (void)torch::autograd::grad({total}, {probe}, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
  }
  at::Tensor squared;
  out.factors = sink->finish_norms(max_grad_norm, mode, rule, squared);
  out.norms = squared.sum(1).sqrt();
  out.seconds["norms"] = since(start);
  start = Clock::now();
  if (sink->needs_replay()) {
    RECORD_USER_SCOPE("privdiff::replayed_backward_with_sums");
    sink->start_replay();
    (void)torch::autograd::grad({total}, {probe}, {}, /*retain_graph=*/false, false, /*allow_unused=*/true);
    sink->check_replay();
  }
  out.sums = sink->sums();
  out.seconds["clipped_sum"] = since(start);
  return out;
}

}  // namespace privdiff::sdk::engine
