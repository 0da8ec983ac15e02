// ddim: DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3).
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::ddim {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class Ddim : public dm::KarrasSampler {
 public:
  using KarrasSampler::KarrasSampler;

 protected:
  at::Tensor integrate(Model& model, const at::Tensor& noise, const at::Tensor& labels, double w,
                       at::Generator& generator) override {
    return dm::ddim_sample(model, noise, labels, w, steps(), config().get_double("eta"), sigma_min(), sigma_max(), rho(),
                           generator);
  }
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Ddim>("ddim", "DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3)",
                        dm::karras_sampler_schema(100)
                            .add(Key::number("eta").at_least(0).at_most(1).defaults(0.0)
                                     .doc("stochasticity: 0 deterministic, 1 ancestral")));
}
}  // namespace

}  // namespace privdiff::plugins::ddim

PRIVDIFF_PLUGIN("ddim", "0.1.0", "DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3)", privdiff::plugins::ddim::register_components)
