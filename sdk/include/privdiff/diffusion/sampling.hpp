#pragma once
/// @file
/// Building blocks of the samplers (Karras et al. 2022, "Elucidating the design space"; DPDM App. C):
/// the sigma schedule, the classifier-free-guided denoiser and the steps themselves.

#include <privdiff/components/model.hpp>
#include <privdiff/components/sampler.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace privdiff::sdk::diffusion {

/// steps + 1 noise levels: sigma_i = (smax^(1/rho) + i/(steps-1) (smin^(1/rho) - smax^(1/rho)))^rho for
/// i < steps, then 0. float64 on CPU.
PRIVDIFF_SDK_API at::Tensor karras_sigmas(std::int64_t steps, double sigma_min = 0.002, double sigma_max = 80,
                                          double rho = 7);

/// D_w(x; sigma) = (1 + w) D(x; sigma, c) - w D(x; sigma) (w = 0: purely conditional, the DPDM code's
/// convention). The unconditional branch has label -1 and the empty caption "" (for a model that
/// conditions on text). No conditioning (undefined labels, no captions) or w = 0 costs one model call.
PRIVDIFF_SDK_API at::Tensor guided_denoise(Model& model, const at::Tensor& x, double sigma, const Conditioning& cond,
                                           double guidance);

/// The sampler ODE/SDE loop shared by the EDM samplers.
struct EdmSamplerOptions {
  std::int64_t steps = 18;
  double sigma_min = 0.002, sigma_max = 80, rho = 7;
  bool second_order = true;     ///< Heun correction (off: Euler)
  double s_churn = 0, s_min = 0, s_max = 1e9, s_noise = 1;  ///< stochastic churn (Karras Alg. 2); 0 = deterministic
};
PRIVDIFF_SDK_API at::Tensor edm_sample(Model& model, const at::Tensor& noise, const Conditioning& cond, double guidance,
                                       const EdmSamplerOptions& options, at::Generator& generator);

/// DDIM in the sigma parameterisation with stochasticity eta (0: deterministic DDIM; 1: ancestral,
/// DDPM-like): x <- D + sigma_down (x - D) / sigma_i + sigma_up z.
PRIVDIFF_SDK_API at::Tensor ddim_sample(Model& model, const at::Tensor& noise, const Conditioning& cond, double guidance,
                                        std::int64_t steps, double eta, double sigma_min, double sigma_max, double rho,
                                        at::Generator& generator);

/// DDIM as above on the given noise levels (descending, float64 [n + 1]; the last may be 0). When the
/// last is sigma_e > 0 the result is x / sqrt(1 + sigma_e^2): the variance-preserving sample at that
/// level, as CompVis's DDIMSampler returns x_{t_0} (its last step goes to abar_0, not to 0).
PRIVDIFF_SDK_API at::Tensor ddim_sample_on(Model& model, const at::Tensor& noise, const Conditioning& cond,
                                           double guidance, const at::Tensor& sigmas, double eta,
                                           at::Generator& generator);

/// The noise levels of CompVis's DDIMSampler (ddim_discretize = "uniform", as txt2img.py and DP-LDM
/// sample): on a DDPM schedule of T levels (alphas_cumprod: abar_0 .. abar_{T-1}) and `steps`, the
/// timesteps t = 1, 1 + c, 1 + 2c, ... < T + 1 with c = floor(T / steps) (make_ddim_timesteps; so T / c
/// of them, not always `steps`), their sigma_t = sqrt((1 - abar_t) / abar_t) from the largest down,
/// then sigma_0 (its last step's abar_prev is abar_0). float64 on CPU. std::invalid_argument when a
/// timestep falls past the schedule (CompVis would index past it) or steps exceeds T.
PRIVDIFF_SDK_API at::Tensor ldm_uniform_sigmas(const std::vector<double>& alphas_cumprod, std::int64_t steps);

/// The keys every sampler on the Karras schedule takes: steps (default `default_steps`), guidance,
/// sigma_min, sigma_max, rho.
PRIVDIFF_SDK_API Schema karras_sampler_schema(std::int64_t default_steps);

/// Base of the samplers on the Karras schedule: draws the initial noise (seeded, in the model's
/// dtype and device), resolves the guidance weight, and leaves the update rule to `integrate`.
class PRIVDIFF_SDK_API KarrasSampler : public Sampler {
 public:
  explicit KarrasSampler(const Config& config);
  ~KarrasSampler() override;
  at::Tensor sample(Model& model, const SampleRequest& request) override;

 protected:
  /// From unit-variance `noise` [count, ...sample_shape] to samples, with guidance weight `w`.
  virtual at::Tensor integrate(Model& model, const at::Tensor& noise, const Conditioning& cond, double w,
                               at::Generator& generator) = 0;
  const Config& config() const { return config_; }
  std::int64_t steps() const { return config_.get_int("steps"); }
  double sigma_min() const { return config_.get_double("sigma_min"); }
  double sigma_max() const { return config_.get_double("sigma_max"); }
  double rho() const { return config_.get_double("rho"); }

 private:
  Config config_;
};

}  // namespace privdiff::sdk::diffusion
