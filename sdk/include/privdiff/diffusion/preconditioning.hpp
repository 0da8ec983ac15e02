#pragma once
/// @file
/// The four diffusion parameterisations DPDM compares (its Table 7 / App. C.1):
///   D(x; sigma) = c_skip(sigma) x + c_out(sigma) F(c_in(sigma) x; c_noise(sigma)),
/// trained with loss weight lambda(sigma) under the training distribution p(sigma).
/// Where the paper's table and the authors' code differ, the code wins (it made the results):
/// v-prediction uses c_skip = 1/(1+s^2) (the table prints 1/sqrt(1+s^2)), c_out = +s/sqrt(1+s^2) and
/// c_noise = t = (2/pi) arccos(1/sqrt(1+s^2)); VP uses c_noise = M t (the table prints (M-1) t).
/// sigma_data = sqrt(1/3), the std of U[-1, 1] (estimating it from the data would cost privacy).
/// A fifth, `discrete`, is the objective of models trained on DDPM's discrete timesteps (CompVis's
/// latent diffusion, diffusers): epsilon-prediction on T noise levels sigma_t = sqrt((1 - abar_t) /
/// abar_t), c_noise the timestep t (fractional between levels: log sigma interpolated, as
/// k-diffusion's DiscreteSchedule does), training levels drawn uniformly from the T.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk::diffusion {

enum class Parameterization { edm, vp, ve, v, discrete };

/// "edm", "vp", "ve", "v" -> Parameterization; throws std::invalid_argument otherwise.
PRIVDIFF_SDK_API Parameterization parameterization_from_string(const std::string& name);

struct PreconditioningCoefficients {
  at::Tensor c_skip, c_out, c_in, c_noise;  ///< each shaped like sigma
};

class PRIVDIFF_SDK_API Preconditioning {
 public:
  explicit Preconditioning(Parameterization kind, double sigma_data = std::sqrt(1.0 / 3));
  /// The discrete DDPM objective on the noise levels of `alphas_cumprod` (abar_0 .. abar_{T-1},
  /// decreasing). Throws std::invalid_argument unless they lie in (0, 1) and decrease.
  static Preconditioning discrete(const std::vector<double>& alphas_cumprod);
  /// The noise levels sigma_0 < ... < sigma_{T-1} of a discrete objective (empty otherwise).
  const std::vector<double>& discrete_sigmas() const { return discrete_sigmas_; }

  Parameterization kind() const { return kind_; }
  double sigma_data() const { return sigma_data_; }
  PreconditioningCoefficients coefficients(const at::Tensor& sigma) const;
  /// lambda(sigma), the loss weight.
  at::Tensor loss_weight(const at::Tensor& sigma) const;
  /// n draws of sigma ~ p(sigma) (float64 on CPU), from `generator`.
  at::Tensor sample_training_sigma(std::int64_t n, at::Generator& generator) const;

 private:
  at::Tensor timestep(const at::Tensor& sigma) const;
  Parameterization kind_;
  double sigma_data_;
  std::vector<double> discrete_sigmas_;
  at::Tensor discrete_levels_, discrete_log_levels_;  ///< the same, as float64 CPU tensors (made once)
};

/// abar_0 .. abar_{T-1} of DDPM's beta schedules as diffusers' DDPMScheduler and CompVis's
/// make_beta_schedule compute them (double precision): "linear" (betas evenly from beta_start to
/// beta_end) or "scaled_linear" (evenly in their square roots; CompVis calls it "linear"). Throws
/// std::invalid_argument for another schedule or betas outside (0, 1).
PRIVDIFF_SDK_API std::vector<double> ddpm_alphas_cumprod(const std::string& beta_schedule, double beta_start,
                                                         double beta_end, std::int64_t timesteps);

}  // namespace privdiff::sdk::diffusion
