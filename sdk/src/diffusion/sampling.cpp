#include <privdiff/diffusion/sampling.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::diffusion {

namespace {
// Standard normals shaped like x, drawn on the CPU generator and moved to x's device: a seed gives
// the same samples on every device.
at::Tensor cpu_normals(const at::Tensor& x, at::Generator& gen) {
  return at::randn(x.sizes(), gen, at::TensorOptions().dtype(x.scalar_type())).to(x.options());
}
}  // namespace

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

at::Tensor guided_denoise(Model& model, const at::Tensor& x, double sigma, const Conditioning& cond, double w) {
  const at::Tensor s = at::full({x.size(0)}, sigma, x.options());
  if ((!cond.labels.defined() && cond.captions.empty()) || w == 0) return model.denoise(x, s, cond);
  Conditioning both;  // the conditional rows, then the unconditional ones
  if (cond.labels.defined()) both.labels = at::cat({cond.labels, at::full_like(cond.labels, -1)});
  if (!cond.captions.empty()) {
    both.captions = cond.captions;
    both.captions.resize(2 * cond.captions.size());  // "" for each unconditional row
  }
  const at::Tensor d = model.denoise(at::cat({x, x}), at::cat({s, s}), both);
  const auto parts = d.chunk(2);
  return (1 + w) * parts[0] - w * parts[1];
}

at::Tensor edm_sample(Model& model, const at::Tensor& noise, const Conditioning& cond, double w,
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
      x = x + std::sqrt(s_hat * s_hat - s_cur * s_cur) * o.s_noise * cpu_normals(x, gen);
    }
    const at::Tensor d = (x - guided_denoise(model, x, s_hat, cond, w)) / s_hat;
    at::Tensor x_next = x + (s_next - s_hat) * d;
    if (o.second_order && s_next > 0) {
      const at::Tensor d_next = (x_next - guided_denoise(model, x_next, s_next, cond, w)) / s_next;
      x_next = x + (s_next - s_hat) * 0.5 * (d + d_next);
    }
    x = x_next;
  }
  return x;
}

at::Tensor ddim_sample(Model& model, const at::Tensor& noise, const Conditioning& cond, double w, std::int64_t steps,
                       double eta, double sigma_min, double sigma_max, double rho, at::Generator& gen) {
  return ddim_sample_on(model, noise, cond, w, karras_sigmas(steps, sigma_min, sigma_max, rho), eta, gen);
}

at::Tensor ddim_sample_on(Model& model, const at::Tensor& noise, const Conditioning& cond, double w,
                          const at::Tensor& sigmas, double eta, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  const std::int64_t steps = sigmas.numel() - 1;
  at::Tensor x = noise * sigmas[0].item<double>();
  for (std::int64_t i = 0; i < steps; ++i) {
    const double s = sigmas[i].item<double>(), s_next = sigmas[i + 1].item<double>();
    const at::Tensor denoised = guided_denoise(model, x, s, cond, w);
    const double up = std::min(s_next, eta * std::sqrt(s_next * s_next * (s * s - s_next * s_next) / (s * s)));
    const double down = std::sqrt(s_next * s_next - up * up);
    x = denoised + down * (x - denoised) / s;
    if (up > 0) x = x + up * cpu_normals(x, gen);
  }
  const double last = sigmas[steps].item<double>();
  return last > 0 ? x / std::sqrt(1 + last * last) : x;
}

at::Tensor ldm_uniform_sigmas(const std::vector<double>& alphas_cumprod, std::int64_t steps) {
  const auto levels = static_cast<std::int64_t>(alphas_cumprod.size());
  if (steps < 1 || steps > levels) {
    throw std::invalid_argument("sampling: " + std::to_string(steps) + " DDIM steps on a schedule of " +
                                std::to_string(levels) + " levels (1 to " + std::to_string(levels) + ")");
  }
  const std::int64_t c = levels / steps;
  auto sigma = [&](std::int64_t t) {
    const double a = alphas_cumprod[static_cast<std::size_t>(t)];
    return std::sqrt((1 - a) / a);
  };
  std::vector<double> out;
  for (std::int64_t t = 0; t < levels; t += c) {
    if (t + 1 >= levels) {
      throw std::invalid_argument("sampling: " + std::to_string(steps) + " DDIM steps on " + std::to_string(levels) +
                                  " levels put a timestep at " + std::to_string(t + 1) + ", past the schedule (choose "
                                  "steps dividing " + std::to_string(levels) + ")");
    }
    out.push_back(sigma(t + 1));
  }
  std::reverse(out.begin(), out.end());
  out.push_back(sigma(0));
  return at::tensor(out, at::TensorOptions().dtype(at::kDouble));
}

Schema karras_sampler_schema(std::int64_t default_steps) {
  return Schema{}
      .add(Key::integer("steps").at_least(1).defaults(default_steps).doc("number of noise levels"))
      .add(Key::number("guidance").at_least(0).defaults(0.0).doc("classifier-free guidance w: (1+w) D(x|y) - w D(x)"))
      .add(Key::number("sigma_min").greater_than(0).defaults(0.002).doc("smallest noise level"))
      .add(Key::number("sigma_max").greater_than(0).defaults(80.0).doc("largest noise level"))
      .add(Key::number("rho").greater_than(0).defaults(7.0).doc("Karras schedule exponent"));
}

KarrasSampler::KarrasSampler(const Config& config) : config_(config) {
  if (!(sigma_max() > sigma_min())) throw std::invalid_argument(config.path() + ": sigma_max must exceed sigma_min");
}

KarrasSampler::~KarrasSampler() = default;

at::Tensor KarrasSampler::sample(Model& model, const SampleRequest& request) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  std::vector<std::int64_t> shape{request.count};
  for (auto d : model.sample_shape()) shape.push_back(d);
  const auto params = model.module().parameters();
  const auto options = params.empty() ? at::TensorOptions().dtype(at::kFloat) : params.front().options().requires_grad(false);
  // Drawn on the CPU generator so a seed gives the same samples on any device.
  const at::Tensor noise = at::randn(shape, generator, at::TensorOptions().dtype(options.dtype())).to(options);
  if (!request.captions.empty() && static_cast<std::int64_t>(request.captions.size()) != request.count) {
    throw std::invalid_argument("sample: " + std::to_string(request.captions.size()) + " prompts for " +
                                std::to_string(request.count) + " samples (one each)");
  }
  return integrate(model, noise, Conditioning{request.labels, request.captions},
                   request.guidance.value_or(config_.get_double("guidance")), generator);
}

}  // namespace privdiff::sdk::diffusion
