#include <privdiff/diffusion/sampling.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

at::Tensor karras_sigmas(std::int64_t steps, double sigma_min, double sigma_max, double rho) {
  if (steps < 1) throw std::invalid_argument("sampling: steps must be >= 1");
  if (!(sigma_min > 0 && sigma_max > sigma_min)) throw std::invalid_argument("sampling: need 0 < sigma_min < sigma_max");
  at::Tensor out = at::zeros({steps + 1}, at::kDouble);
  const double a = std::pow(sigma_max, 1 / rho), b = std::pow(sigma_min, 1 / rho);
  for (std::int64_t i = 0; i < steps; ++i) {
    const double frac = steps == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(steps - 1);
    out[i] = std::pow(a + frac * (b - a), rho);
  }
  return out;
}

at::Tensor guided_denoise(Model& model, const at::Tensor& x, double sigma, const at::Tensor& labels, double w) {
  const at::Tensor s = at::full({x.size(0)}, sigma, x.options());
  if (!labels.defined() || w == 0) return model.denoise(x, s, Conditioning{labels});
  const at::Tensor unconditional = at::full_like(labels, -1);
  const at::Tensor d = model.denoise(at::cat({x, x}), at::cat({s, s}), Conditioning{at::cat({labels, unconditional})});
  const auto parts = d.chunk(2);
  return (1 + w) * parts[0] - w * parts[1];
}

at::Tensor edm_sample(Model& model, const at::Tensor& noise, const at::Tensor& labels, double w,
                      const EdmSamplerOptions& o, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  const at::Tensor sigmas = karras_sigmas(o.steps, o.sigma_min, o.sigma_max, o.rho);
  at::Tensor x = noise * sigmas[0].item<double>();
  const double gamma_max = std::min(o.s_churn / static_cast<double>(o.steps), std::sqrt(2.0) - 1);
  for (std::int64_t i = 0; i < o.steps; ++i) {
    const double s_cur = sigmas[i].item<double>(), s_next = sigmas[i + 1].item<double>();
    // Churn: raise the noise level to s_hat by adding fresh noise.
    const double gamma = (s_cur >= o.s_min && s_cur <= o.s_max) ? gamma_max : 0.0;
    const double s_hat = s_cur * (1 + gamma);
    if (gamma > 0) {
      x = x + std::sqrt(s_hat * s_hat - s_cur * s_cur) * o.s_noise * at::randn(x.sizes(), gen, x.options());
    }
    const at::Tensor d = (x - guided_denoise(model, x, s_hat, labels, w)) / s_hat;
    at::Tensor x_next = x + (s_next - s_hat) * d;
    if (o.second_order && s_next > 0) {
      const at::Tensor d_next = (x_next - guided_denoise(model, x_next, s_next, labels, w)) / s_next;
      x_next = x + (s_next - s_hat) * 0.5 * (d + d_next);
    }
    x = x_next;
  }
  return x;
}

at::Tensor ddim_sample(Model& model, const at::Tensor& noise, const at::Tensor& labels, double w, std::int64_t steps,
                       double eta, double sigma_min, double sigma_max, double rho, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  const at::Tensor sigmas = karras_sigmas(steps, sigma_min, sigma_max, rho);
  at::Tensor x = noise * sigmas[0].item<double>();
  for (std::int64_t i = 0; i < steps; ++i) {
    const double s = sigmas[i].item<double>(), s_next = sigmas[i + 1].item<double>();
    const at::Tensor denoised = guided_denoise(model, x, s, labels, w);
    const double up = std::min(s_next, eta * std::sqrt(s_next * s_next * (s * s - s_next * s_next) / (s * s)));
    const double down = std::sqrt(s_next * s_next - up * up);
    x = denoised + down * (x - denoised) / s;
    if (up > 0) x = x + up * at::randn(x.sizes(), gen, x.options());
  }
  return x;
}

}  // namespace privdiff::sdk::diffusion
