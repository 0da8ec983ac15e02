// ddpm: ancestral (DDPM-style) sampler: DDIM at eta = 1.
#include <privdiff/diffusion/sampler_plugin.hpp>

namespace privdiff::plugins::ddpm {

namespace dm = privdiff::sdk::diffusion;

at::Tensor integrate(const dm::KarrasRun& r) {
  return dm::ddim_sample(r.model, r.noise, r.cond, r.guidance, r.steps, 1.0, r.sigma_min, r.sigma_max, r.rho,
                         r.generator);
}

}  // namespace privdiff::plugins::ddpm

PRIVDIFF_KARRAS_SAMPLER_PLUGIN("ddpm", "0.1.0", "ancestral (DDPM-style) sampler",
                               privdiff::sdk::diffusion::karras_sampler_schema(1000), privdiff::plugins::ddpm::integrate)
