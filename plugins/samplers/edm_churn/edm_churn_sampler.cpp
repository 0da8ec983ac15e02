// edm_churn: stochastic EDM sampler with churn (Karras Alg. 2).
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::edm_churn {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class EdmChurn : public dm::KarrasSampler {
 public:
  using KarrasSampler::KarrasSampler;

 protected:
  at::Tensor integrate(Model& model, const at::Tensor& noise, const at::Tensor& labels, double w,
                       at::Generator& generator) override {
    const auto& c = config();
    dm::EdmSamplerOptions o{steps(), sigma_min(), sigma_max(), rho(), true, c.get_double("s_churn"),
                            c.get_double("s_min"), c.get_double("s_max"), c.get_double("s_noise")};
    return dm::edm_sample(model, noise, labels, w, o, generator);
  }
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<EdmChurn>("edm_churn", "stochastic EDM sampler with churn (Karras Alg. 2)",
                        dm::karras_sampler_schema(256)
                            .add(Key::number("s_churn").at_least(0).defaults(50.0).doc("total churn"))
                            .add(Key::number("s_min").at_least(0).defaults(0.05).doc("churn only for sigma >= s_min"))
                            .add(Key::number("s_max").at_least(0).defaults(50.0).doc("churn only for sigma <= s_max"))
                            .add(Key::number("s_noise").greater_than(0).defaults(1.003).doc("noise inflation of the churn")));
}
}  // namespace

}  // namespace privdiff::plugins::edm_churn

PRIVDIFF_PLUGIN("edm_churn", "0.1.0", "stochastic EDM sampler with churn (Karras Alg. 2)", privdiff::plugins::edm_churn::register_components)
