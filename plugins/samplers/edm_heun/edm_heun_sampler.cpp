// edm_heun: deterministic 2nd-order (Heun) EDM sampler.
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::edm_heun {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class EdmHeun : public dm::KarrasSampler {
 public:
  using KarrasSampler::KarrasSampler;

 protected:
  at::Tensor integrate(Model& model, const at::Tensor& noise, const at::Tensor& labels, double w,
                       at::Generator& generator) override {
    dm::EdmSamplerOptions o{steps(), sigma_min(), sigma_max(), rho(), true};
    return dm::edm_sample(model, noise, labels, w, o, generator);
  }
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<EdmHeun>("edm_heun", "deterministic 2nd-order (Heun) EDM sampler",
                        dm::karras_sampler_schema(18));
}
}  // namespace

}  // namespace privdiff::plugins::edm_heun

PRIVDIFF_PLUGIN("edm_heun", "0.1.0", "deterministic 2nd-order (Heun) EDM sampler", privdiff::plugins::edm_heun::register_components)
