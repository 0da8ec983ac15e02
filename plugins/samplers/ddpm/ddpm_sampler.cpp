// ddpm: ancestral (DDPM-style) sampler.
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::ddpm {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class Ddpm : public dm::KarrasSampler {
 public:
  using KarrasSampler::KarrasSampler;

 protected:
  at::Tensor integrate(Model& model, const at::Tensor& noise, const at::Tensor& labels, double w,
                       at::Generator& generator) override {
    return dm::ddim_sample(model, noise, labels, w, steps(), 1.0, sigma_min(), sigma_max(), rho(), generator);
  }
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Ddpm>("ddpm", "ancestral (DDPM-style) sampler",
                        dm::karras_sampler_schema(1000));
}
}  // namespace

}  // namespace privdiff::plugins::ddpm

PRIVDIFF_PLUGIN("ddpm", "0.1.0", "ancestral (DDPM-style) sampler", privdiff::plugins::ddpm::register_components)
