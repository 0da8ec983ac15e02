// A DP-SGD step's releases besides its gradient (DpSgdMechanism::step_releases): the declared
// statistics noised from the stage's stream, summed over the ranks, reported to the checks, and the
// step's one privacy event on its batch.
#include "step_releases.hpp"

#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/parallel/collective.hpp>

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {
bool positive_finite(double v) { return std::isfinite(v) && v > 0; }
}  // namespace

void check_step_releases(const std::vector<DpSgdMechanism::StepRelease>& declared) {
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const auto& r = declared[i];
    if (r.name.empty()) throw std::invalid_argument("step_releases: a release has no name");
    if (!positive_finite(r.sensitivity) || !positive_finite(r.noise_multiplier)) {
      throw std::invalid_argument("step_releases: '" + r.name + "' needs a sensitivity and a noise multiplier > 0 "
                                  "(a release without noise is not private)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (declared[j].name == r.name) throw std::invalid_argument("step_releases: '" + r.name + "' declared twice");
    }
  }
}

std::vector<DpSgdMechanism::StepRelease> at_sigma(std::vector<DpSgdMechanism::StepRelease> declared, double sigma) {
  check_step_releases(declared);
  for (auto& r : declared) {
    if (r.relative_to_sigma) r.noise_multiplier *= sigma, r.relative_to_sigma = false;
  }
  return declared;
}

PrivacyEvent step_event_of(double sigma, double q, const std::vector<DpSgdMechanism::StepRelease>& declared) {
  if (declared.empty()) return PrivacyEvent::poisson_sampled(q, PrivacyEvent::gaussian(sigma));
  std::vector<PrivacyEvent> parts{PrivacyEvent::gaussian(sigma)};
  for (const auto& r : at_sigma(declared, sigma)) parts.push_back(PrivacyEvent::gaussian(r.noise_multiplier));
  return PrivacyEvent::poisson_sampled(q, PrivacyEvent::composed(std::move(parts)));
}

std::size_t DpSgdMechanism::StepReleases::index_of(const std::string& name) const {
  std::size_t i = 0;
  while (i < declared.size() && declared[i].name != name) ++i;
  return i;
}

at::Tensor DpSgdMechanism::StepReleases::release(const std::string& name, const at::Tensor& value) {
  const std::size_t i = index_of(name);
  if (i == declared.size()) {
    throw std::logic_error("release_statistic('" + name + "'): not among the mechanism's step_releases() (a release "
                           "must be declared, so that its noise is on the ledger)");
  }
  if (made[i]) throw std::logic_error("release_statistic('" + name + "'): released twice in one step");
  made[i] = true;
  const StepRelease& r = declared[i];
  at::Tensor v = value.detach().to(at::kDouble).to(at::kCPU).contiguous().clone();
  if (ranks) {
    std::vector<at::Tensor> parts{v};
    ranks->all_reduce_sum(parts);
    v = parts[0];
  }
  if (!ranks || ranks->rank() == 0) v = v + noise.sample(v, r.noise_multiplier * r.sensitivity);
  if (ranks) ranks->broadcast(v, 0);
  const ReleasedStatistic statistic{name + ", step " + std::to_string(step), v, r.sensitivity,
                                    r.noise_multiplier * r.sensitivity, false, r.noise_multiplier};
  if (context.released_statistic) context.released_statistic(statistic);
  if (context.replay_release) v = context.replay_release(statistic);
  return v.to(value.device());
}

void DpSgdMechanism::StepReleases::check_all_made() const {
  for (std::size_t i = 0; i < declared.size(); ++i) {
    if (!made[i]) {
      throw std::logic_error("step " + std::to_string(step) + ": the declared release '" + declared[i].name +
                             "' was not made (after_step_gradient must call release_statistic for each of "
                             "step_releases(), at every step: the ledger records its noise)");
    }
  }
}

StepReport::NoiseBasis DpSgdMechanism::StepReleases::basis_of(const std::string& name, const at::Tensor& basis) const {
  const std::size_t i = index_of(name);
  if (i == declared.size() || !made[i]) {
    throw std::logic_error("state_noise_basis('" + name + "'): not a declared release made this step (release it "
                           "with release_statistic first)");
  }
  const at::Tensor u = basis.detach().to(at::kDouble).to(at::kCPU).contiguous().clone();
  if (u.dim() != 2 || u.size(1) == 0 || u.size(1) > u.size(0)) {
    throw std::logic_error("state_noise_basis('" + name + "'): the basis must be [d, k] with 0 < k <= d");
  }
  const at::Tensor gram = at::matmul(u.t(), u) - at::eye(u.size(1), u.options());
  if (gram.abs().max().item<double>() > 1e-6) {
    throw std::logic_error("state_noise_basis('" + name + "'): the basis's columns are not orthonormal");
  }
  return {name, u, declared[i].noise_multiplier * declared[i].sensitivity};
}

void DpSgdMechanism::state_noise_basis(const std::string& name, const at::Tensor& basis) {
  if (!releasing_) throw std::logic_error("state_noise_basis('" + name + "') outside after_step_gradient");
  StepReport::NoiseBasis b = releasing_->basis_of(name, basis);
  for (const auto& other : stated_bases_) {  // one basis per release, apart from every other one
    if (other.release == name) throw std::logic_error("state_noise_basis('" + name + "'): stated twice in one step");
    if (!other.basis.sizes().equals({b.basis.size(0), other.basis.size(1)}) ||
        at::matmul(other.basis.t(), b.basis).abs().max().item<double>() > 1e-6) {
      throw std::logic_error("state_noise_basis('" + name + "'): overlaps the basis of '" + other.release + "'");
    }
  }
  stated_bases_.push_back(std::move(b));
}

at::Tensor DpSgdMechanism::release_statistic(const std::string& name, const at::Tensor& value) {
  if (!releasing_) throw std::logic_error("release_statistic('" + name + "') outside after_step_gradient");
  return releasing_->release(name, value);
}

void DpSgdMechanism::set_clip_norm(double c) {
  if (!positive_finite(c)) throw std::invalid_argument("set_clip_norm: the clip norm must be > 0 and finite");
  // Only where the engine knows what the step released: set elsewhere (in clipped_chunk_sum, say) it
  // could follow the private batch, and change the sensitivity of the very step being clipped.
  if (!releasing_) throw std::logic_error("set_clip_norm outside after_step_gradient");
  clip_norm_ = c;
}

void DpSgdMechanism::after_step_gradient(const at::Tensor&) {}
void DpSgdMechanism::save_mechanism_state(torch::serialize::OutputArchive&) const {}
void DpSgdMechanism::load_mechanism_state(torch::serialize::InputArchive&) {}

std::map<std::string, double> DpSgdMechanism::step_metrics() const {
  if (clip_norm_ == options_.max_grad_norm) return {};
  return {{"clip_norm", clip_norm_}};
}

PrivacyEvent DpSgdMechanism::step_event(double sigma, double q) const {
  return step_event_of(sigma, q, step_releases());
}

void DpSgdMechanism::make_step_releases(StageContext& context, GaussianNoise& noise, std::int64_t step,
                                        const at::Tensor& norms, const std::vector<StepRelease>& declared) {
  StepReleases releases{declared, std::vector<bool>(declared.size(), false), context, noise, context.collective,
                        step};
  releasing_ = &releases;
  stated_bases_.clear();
  try {
    after_step_gradient(norms);
  } catch (...) {
    releasing_ = nullptr;
    throw;
  }
  releasing_ = nullptr;
  releases.check_all_made();
}

void DpSgdMechanism::save_own_state(torch::serialize::OutputArchive& state) const {
  state.write("clip_norm", at::full({1}, clip_norm_, at::kDouble));
  torch::serialize::OutputArchive mine(state.compilation_unit());
  save_mechanism_state(mine);
  state.write("mechanism", mine);
}

void DpSgdMechanism::load_own_state(torch::serialize::InputArchive& state) {
  at::Tensor c;
  if (state.try_read("clip_norm", c)) clip_norm_ = c.item<double>();  // older checkpoints: max_grad_norm
  torch::serialize::InputArchive mine;
  if (state.try_read("mechanism", mine)) load_mechanism_state(mine);
}

}  // namespace privdiff::sdk::engine
