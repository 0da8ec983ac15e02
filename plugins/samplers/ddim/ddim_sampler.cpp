// ddim: DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3).
#include <privdiff/diffusion/sampler_plugin.hpp>

namespace privdiff::plugins::ddim {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

at::Tensor integrate(const dm::KarrasRun& r) {
  return dm::ddim_sample(r.model, r.noise, r.cond, r.guidance, r.steps, r.config.get_double("eta"), r.sigma_min,
                         r.sigma_max, r.rho, r.generator);
}

Schema schema() {
  return dm::karras_sampler_schema(100).add(
      Key::number("eta").at_least(0).at_most(1).defaults(0.0).doc("stochasticity: 0 deterministic, 1 ancestral"));
}

}  // namespace privdiff::plugins::ddim

PRIVDIFF_KARRAS_SAMPLER_PLUGIN("ddim", "0.1.0", "DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3)",
                               privdiff::plugins::ddim::schema(), privdiff::plugins::ddim::integrate)
