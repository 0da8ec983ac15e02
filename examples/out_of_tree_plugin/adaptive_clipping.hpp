#pragma once
// Adaptive quantile clipping (Andrew, Thakkar, McMahan & Ramaswamy, NeurIPS 2021): the clip norm
// follows a target quantile of the per-example gradient norms. Each step releases, besides its noised
// gradient, the number of examples its clip norm left unclipped, with Gaussian noise of its own, and
// moves the clip norm geometrically towards the quantile from that *noisy* count:
//   b_t = (#{i : ||g_i|| <= C_t} + N(0, sigma_b^2)) / B,   C_{t+1} = C_t exp(-eta (b_t - gamma)).
// Both releases read one Poisson batch, so the ledger states each step as one event,
// PoissonSampled(q, Composed([Gaussian(sigma), Gaussian(sigma_b)])) (the engine composes the step's
// declared releases; docs/writing-a-mechanism.md#adaptive-clipping-a-second-release-of-each-batch-and-state-kept-between-steps). The gradient's noise is
// sigma C_t, so a step costs the same whatever C_t is; max_grad_norm is C_0. C_t is restored on resume
// by the engine; the count is released through the SDK, so the checks can replay the next steps.
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

namespace adaptive_clipping {

using namespace privdiff::sdk;

// DP-SGD's recipe keys plus the quantile, the clip norm's learning rate and the count's noise.
inline Schema schema() {
  Schema s = engine::dp_sgd_schema(/*is_private=*/true, /*with_noise_multiplicity=*/false);
  s.add(Key::number("target_quantile").greater_than(0).less_than(1).defaults(0.5)
            .doc("gamma: the fraction of examples the clip norm should leave unclipped"));
  s.add(Key::number("clip_lr").greater_than(0).defaults(0.2)
            .doc("eta: the geometric step of the clip norm, C <- C exp(-eta (b - gamma))"));
  s.add(Key::number("count_noise_multiplier").greater_than(0).defaults(10.0)
            .doc("sigma_b: the noise std of the unclipped count (its sensitivity is 1)"));
  s.document("max_grad_norm", "C_0: the first step's clip norm (later steps' follow the quantile)");
  return s;
}

class AdaptiveClipping : public engine::DpSgdMechanism {
 public:
  explicit AdaptiveClipping(const Config& config)
      : DpSgdMechanism(engine::dp_sgd_options(config, /*is_private=*/true)),
        quantile_(config.get_double("target_quantile")),
        clip_lr_(config.get_double("clip_lr")),
        count_sigma_(config.get_double("count_noise_multiplier")) {}

 protected:
  // The count is released at every step: one record moves it by at most 1.
  std::vector<StepRelease> step_releases() const override { return {{"unclipped count", 1.0, count_sigma_}}; }

  // After the step's noised gradient: release the noisy count and move C from it (a function of
  // released values only, as the engine requires of anything kept for the next step).
  void after_step_gradient(const at::Tensor& norms) override {
    const at::Tensor unclipped = (norms <= clip_norm()).sum().to(at::kDouble).reshape({1});
    const double count = release_statistic("unclipped count", unclipped).item<double>();
    const double fraction = count / static_cast<double>(options().batch_size);  // B = q N, public
    set_clip_norm(clip_norm() * std::exp(-clip_lr_ * (fraction - quantile_)));
  }

 private:
  double quantile_, clip_lr_, count_sigma_;
};

}  // namespace adaptive_clipping
