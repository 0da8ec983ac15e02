#include <privdiff/diffusion/preconditioning.hpp>

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::sdk::diffusion {

namespace {
// VP (Song et al.): sigma(t) = sqrt(exp(beta_d t^2 / 2 + beta_min t) - 1), t ~ U(eps_t, 1).
constexpr double vp_beta_d = 19.9, vp_beta_min = 0.1, vp_eps_t = 1e-5, vp_m = 1000;
// VE: ln sigma ~ U(ln 0.002, ln 80).
constexpr double ve_sigma_min = 0.002, ve_sigma_max = 80;
// EDM: ln sigma ~ N(-1.2, 1.2^2).
constexpr double edm_p_mean = -1.2, edm_p_std = 1.2;

// v-prediction: t in [eps_min, eps_max] with logSNR in [-9, 13]; sigma(t) = tan(pi t / 2).
double v_eps(double log_snr) { return 2 / M_PI * std::acos(1 / std::sqrt(1 + std::exp(-log_snr))); }

at::Tensor vp_t(const at::Tensor& sigma) {  // inverse of sigma(t)
  return ((vp_beta_min * vp_beta_min + 2 * vp_beta_d * at::log1p(sigma.pow(2))).sqrt() - vp_beta_min) / vp_beta_d;
}
}  // namespace

Parameterization parameterization_from_string(const std::string& name) {
  if (name == "edm") return Parameterization::edm;
  if (name == "vp") return Parameterization::vp;
  if (name == "ve") return Parameterization::ve;
  if (name == "v") return Parameterization::v;
  throw std::invalid_argument("preconditioning must be one of edm, vp, ve, v; got \"" + name + "\"");
}

Preconditioning::Preconditioning(Parameterization kind, double sigma_data) : kind_(kind), sigma_data_(sigma_data) {
  if (kind == Parameterization::discrete) throw std::invalid_argument("a discrete objective needs its schedule: Preconditioning::discrete");
}

Preconditioning Preconditioning::discrete(const std::vector<double>& alphas_cumprod) {
  Preconditioning p(Parameterization::vp);
  p.kind_ = Parameterization::discrete;
  p.sigma_data_ = 1;
  for (std::size_t t = 0; t < alphas_cumprod.size(); ++t) {
    const double a = alphas_cumprod[t];
    if (!(a > 0 && a < 1) || (t > 0 && !(a < alphas_cumprod[t - 1]))) {
      throw std::invalid_argument("discrete schedule: alphas_cumprod[" + std::to_string(t) + "] = " + std::to_string(a) +
                                  " is not in (0, 1) below the one before");
    }
    p.discrete_sigmas_.push_back(std::sqrt((1 - a) / a));
  }
  if (p.discrete_sigmas_.size() < 2) throw std::invalid_argument("discrete schedule: fewer than two timesteps");
  p.discrete_levels_ = at::tensor(p.discrete_sigmas_, at::TensorOptions(at::kDouble));
  p.discrete_log_levels_ = p.discrete_levels_.log();
  return p;
}

// The fractional timestep of each sigma: log sigma interpolated linearly between the two levels
// around it, clamped to [0, T - 1].
at::Tensor Preconditioning::timestep(const at::Tensor& sigma) const {
  const auto options = at::TensorOptions(at::kDouble).device(sigma.device());
  const at::Tensor levels = discrete_log_levels_.to(sigma.device());
  const auto last = static_cast<std::int64_t>(discrete_sigmas_.size()) - 1;
  const at::Tensor log_sigma = sigma.to(options).log().reshape({-1});
  const at::Tensor high = at::searchsorted(levels, log_sigma).clamp(1, last);
  const at::Tensor low = high - 1;
  const at::Tensor w = ((levels.index_select(0, high) - log_sigma) / (levels.index_select(0, high) - levels.index_select(0, low)))
                           .clamp(0, 1);
  return ((1 - w) * high.to(at::kDouble) + w * low.to(at::kDouble)).reshape(sigma.sizes()).to(sigma.scalar_type());
}

PreconditioningCoefficients Preconditioning::coefficients(const at::Tensor& sigma) const {
  const double sd = sigma_data_;
  const at::Tensor s2 = sigma.pow(2);
  switch (kind_) {
    case Parameterization::edm:
      return {sd * sd / (s2 + sd * sd), sigma * sd / (s2 + sd * sd).sqrt(), 1 / (s2 + sd * sd).sqrt(), sigma.log() / 4};
    case Parameterization::vp:
      return {at::ones_like(sigma), -sigma, 1 / (s2 + 1).sqrt(), vp_m * vp_t(sigma)};
    case Parameterization::ve:
      return {at::ones_like(sigma), sigma.clone(), at::ones_like(sigma), (sigma / 2).log()};
    case Parameterization::v:
      return {1 / (1 + s2), sigma / (1 + s2).sqrt(), 1 / (1 + s2).sqrt(), 2 / M_PI * at::arccos(1 / (1 + s2).sqrt())};
    case Parameterization::discrete:
      return {at::ones_like(sigma), -sigma, 1 / (s2 + 1).sqrt(), timestep(sigma)};
  }
  throw std::logic_error("unknown parameterization");
}

at::Tensor Preconditioning::loss_weight(const at::Tensor& sigma) const {
  const double sd = sigma_data_;
  const at::Tensor s2 = sigma.pow(2);
  switch (kind_) {
    case Parameterization::edm: return (s2 + sd * sd) / (s2 * sd * sd);
    case Parameterization::vp:
    case Parameterization::ve:
    case Parameterization::discrete: return 1 / s2;
    case Parameterization::v: return (s2 + 1) / s2;
  }
  throw std::logic_error("unknown parameterization");
}

at::Tensor Preconditioning::sample_training_sigma(std::int64_t n, at::Generator& gen) const {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  switch (kind_) {
    case Parameterization::edm: return (at::randn({n}, gen, opts) * edm_p_std + edm_p_mean).exp();
    case Parameterization::vp: {
      const at::Tensor t = at::rand({n}, gen, opts) * (1 - vp_eps_t) + vp_eps_t;
      return (0.5 * vp_beta_d * t.pow(2) + vp_beta_min * t).expm1().sqrt();
    }
    case Parameterization::ve:
      return (at::rand({n}, gen, opts) * (std::log(ve_sigma_max) - std::log(ve_sigma_min)) + std::log(ve_sigma_min)).exp();
    case Parameterization::v: {
      const double lo = v_eps(-9), hi = v_eps(13);  // t grows with sigma: logSNR 13 is the low-noise end
      const double t_min = std::min(lo, hi), t_max = std::max(lo, hi);
      return at::tan(M_PI / 2 * (at::rand({n}, gen, opts) * (t_max - t_min) + t_min));
    }
    case Parameterization::discrete: {  // t uniform on {0, ..., T - 1}, as DDPM trains
      const at::Tensor t = at::randint(static_cast<std::int64_t>(discrete_sigmas_.size()), {n}, gen, at::TensorOptions(at::kLong));
      return discrete_levels_.index_select(0, t);
    }
  }
  throw std::logic_error("unknown parameterization");
}

std::vector<double> ddpm_alphas_cumprod(const std::string& beta_schedule, double beta_start, double beta_end,
                                        std::int64_t timesteps) {
  if (beta_schedule != "linear" && beta_schedule != "scaled_linear") {
    throw std::invalid_argument("beta_schedule \"" + beta_schedule + "\" is not supported (linear, scaled_linear)");
  }
  if (timesteps < 2 || !(beta_start > 0) || !(beta_end < 1) || !(beta_start <= beta_end)) {
    throw std::invalid_argument("DDPM schedule: need 0 < beta_start <= beta_end < 1 and at least two timesteps");
  }
  const bool scaled = beta_schedule == "scaled_linear";
  const double first = scaled ? std::sqrt(beta_start) : beta_start, last = scaled ? std::sqrt(beta_end) : beta_end;
  std::vector<double> out;
  double product = 1;
  for (std::int64_t t = 0; t < timesteps; ++t) {
    const double x = first + (last - first) * static_cast<double>(t) / static_cast<double>(timesteps - 1);
    product *= 1 - (scaled ? x * x : x);
    out.push_back(product);
  }
  return out;
}

}  // namespace privdiff::sdk::diffusion
