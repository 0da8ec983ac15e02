#pragma once
// The engine's side of a DP-SGD step's declared releases (DpSgdMechanism::step_releases).

#include <privdiff/components/mechanism.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

/// Throws std::invalid_argument for a release without a name, noise or sensitivity, or named twice.
void check_step_releases(const std::vector<DpSgdMechanism::StepRelease>& declared);
/// The releases, checked (check_step_releases), with their multipliers at gradient noise multiplier
/// sigma (relative_to_sigma resolved).
std::vector<DpSgdMechanism::StepRelease> at_sigma(std::vector<DpSgdMechanism::StepRelease> declared, double sigma);
/// One logical step's event (the releases checked): PoissonSampled(q, Gaussian(sigma)), or with declared releases
/// PoissonSampled(q, Composed([Gaussian(sigma), Gaussian(sigma_1), ...])) (one batch, one event).
PrivacyEvent step_event_of(double sigma, double q, const std::vector<DpSgdMechanism::StepRelease>& declared);

/// The releases of one step while after_step_gradient runs.
struct DpSgdMechanism::StepReleases {
  const std::vector<StepRelease>& declared;
  std::vector<bool> made;
  StageContext& context;
  GaussianNoise& noise;
  Collective* ranks;
  std::int64_t step;  // from 1

  /// The position of the declared release `name` (declared.size(): not declared).
  std::size_t index_of(const std::string& name) const;
  at::Tensor release(const std::string& name, const at::Tensor& value);
  /// state_noise_basis's checks and report entry.
  StepReport::NoiseBasis basis_of(const std::string& name, const at::Tensor& basis) const;
  /// Throws std::logic_error naming a declared release the step did not make.
  void check_all_made() const;
};

}  // namespace privdiff::sdk::engine
