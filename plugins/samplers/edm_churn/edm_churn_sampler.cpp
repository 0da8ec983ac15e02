// edm_churn: stochastic EDM sampler with churn (Karras Alg. 2).
#include <privdiff/diffusion/sampler_plugin.hpp>

namespace privdiff::plugins::edm_churn {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

at::Tensor integrate(const dm::KarrasRun& r) {
  const Config& c = r.config;
  const dm::EdmSamplerOptions o{r.steps, r.sigma_min, r.sigma_max, r.rho, true, c.get_double("s_churn"),
                                c.get_double("s_min"), c.get_double("s_max"), c.get_double("s_noise")};
  return dm::edm_sample(r.model, r.noise, r.cond, r.guidance, o, r.generator);
}

Schema schema() {
  return dm::karras_sampler_schema(256)
      .add(Key::number("s_churn").at_least(0).defaults(50.0).doc("total churn"))
      .add(Key::number("s_min").at_least(0).defaults(0.05).doc("churn only for sigma >= s_min"))
      .add(Key::number("s_max").at_least(0).defaults(50.0).doc("churn only for sigma <= s_max"))
      .add(Key::number("s_noise").greater_than(0).defaults(1.003).doc("noise inflation of the churn"));
}

}  // namespace privdiff::plugins::edm_churn

PRIVDIFF_KARRAS_SAMPLER_PLUGIN("edm_churn", "0.1.0", "stochastic EDM sampler with churn (Karras Alg. 2)",
                               privdiff::plugins::edm_churn::schema(), privdiff::plugins::edm_churn::integrate)
