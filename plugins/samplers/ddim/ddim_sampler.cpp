// ddim: DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3), on the Karras schedule
// or, with schedule = "ldm", on the uniform timesteps of CompVis's DDIMSampler (DP-LDM's sampling:
// 200 steps, eta 0, scale 5 = guidance 4).
#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/diffusion/sampler_plugin.hpp>

namespace privdiff::plugins::ddim {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

at::Tensor integrate(const dm::KarrasRun& r) {
  const double eta = r.config.get_double("eta");
  if (r.config.get_string("schedule") == "ldm") {
    const std::vector<double> abar = dm::ddpm_alphas_cumprod("scaled_linear", r.config.get_double("linear_start"),
                                                             r.config.get_double("linear_end"),
                                                             r.config.get_int("timesteps"));
    return dm::ddim_sample_on(r.model, r.noise, r.cond, r.guidance, dm::ldm_uniform_sigmas(abar, r.steps), eta,
                              r.generator);
  }
  return dm::ddim_sample(r.model, r.noise, r.cond, r.guidance, r.steps, eta, r.sigma_min, r.sigma_max, r.rho,
                         r.generator);
}

Schema schema() {
  return dm::karras_sampler_schema(100)
      .add(Key::number("eta").at_least(0).at_most(1).defaults(0.0).doc("stochasticity: 0 deterministic, 1 ancestral"))
      .add(Key::string("schedule").one_of({"karras", "ldm"}).defaults("karras")
               .doc("noise levels: karras (sigma_min, sigma_max, rho) or ldm, the uniform timesteps of CompVis's "
                    "DDIMSampler on the model's DDPM schedule (linear_start, linear_end, timesteps; DP-LDM samples "
                    "so: steps = 200, eta = 0, guidance = 4, CompVis's scale 5)"))
      .add(Key::number("linear_start").greater_than(0).less_than(1).defaults(0.00085)
               .doc("schedule = ldm: the model's first beta (its config's linear_start; LDM txt2img and SD: 0.00085)"))
      .add(Key::number("linear_end").greater_than(0).less_than(1).defaults(0.012)
               .doc("schedule = ldm: the model's last beta (linear_end; LDM txt2img and SD: 0.012)"))
      .add(Key::integer("timesteps").at_least(2).defaults(1000)
               .doc("schedule = ldm: the model's DDPM levels (its config's timesteps)"));
}

}  // namespace privdiff::plugins::ddim

PRIVDIFF_KARRAS_SAMPLER_PLUGIN("ddim", "0.1.0",
                               "DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3), on the Karras "
                               "schedule or CompVis's uniform DDIM timesteps (schedule = ldm)",
                               privdiff::plugins::ddim::schema(), privdiff::plugins::ddim::integrate)
