// ddim: DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3).
#include <privdiff/components/sampler.hpp>
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace privdiff::plugins::ddim {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class Ddim : public Sampler {
 public:
  explicit Ddim(const Config& config) : c_(config), steps_(config.get_int("steps")) {}

  at::Tensor sample(Model& model, const SampleRequest& request) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(request.seed);
    std::vector<std::int64_t> shape{request.count};
    for (auto d : model.sample_shape()) shape.push_back(d);
    const auto& params = model.module().parameters();
    const auto options = params.empty() ? at::TensorOptions().dtype(at::kFloat) : params.front().options().requires_grad(false);
    const at::Tensor noise = at::randn(shape, gen, at::TensorOptions().dtype(options.dtype())).to(options);
    const double w = request.guidance.value_or(c_.get_double("guidance"));
    return dm::ddim_sample(model, noise, request.labels, w, steps_, c_.get_double("eta"), c_.get_double("sigma_min"),
                           c_.get_double("sigma_max"), c_.get_double("rho"), gen);
  }

 private:
  Config c_;
  std::int64_t steps_;
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Ddim>("ddim", "DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3)",
                        Schema{}
          .add(Key::integer("steps").at_least(1).defaults(100).doc("number of noise levels"))
          .add(Key::number("guidance").at_least(0).defaults(0.0).doc("classifier-free guidance w: (1+w) D(x|y) - w D(x)"))
          .add(Key::number("sigma_min").greater_than(0).defaults(0.002).doc("smallest noise level"))
          .add(Key::number("sigma_max").greater_than(0).defaults(80.0).doc("largest noise level"))
          .add(Key::number("rho").greater_than(0).defaults(7.0).doc("Karras schedule exponent"))
          .add(Key::number("eta").at_least(0).at_most(1).defaults(0.0).doc("stochasticity: 0 deterministic, 1 ancestral")));
}
}  // namespace

}  // namespace privdiff::plugins::ddim

PRIVDIFF_PLUGIN("ddim", "0.1.0", "DDIM (deterministic at eta = 0, stochastic for eta > 0; DPDM App. C.3)", privdiff::plugins::ddim::register_components)
