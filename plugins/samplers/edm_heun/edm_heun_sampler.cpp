// edm_heun: deterministic 2nd-order (Heun) EDM sampler.
#include <privdiff/diffusion/sampler_plugin.hpp>

namespace privdiff::plugins::edm_heun {

namespace dm = privdiff::sdk::diffusion;

at::Tensor integrate(const dm::KarrasRun& r) {
  const dm::EdmSamplerOptions o{r.steps, r.sigma_min, r.sigma_max, r.rho, true};
  return dm::edm_sample(r.model, r.noise, r.cond, r.guidance, o, r.generator);
}

}  // namespace privdiff::plugins::edm_heun

PRIVDIFF_KARRAS_SAMPLER_PLUGIN("edm_heun", "0.1.0", "deterministic 2nd-order (Heun) EDM sampler",
                               privdiff::sdk::diffusion::karras_sampler_schema(18),
                               privdiff::plugins::edm_heun::integrate)
