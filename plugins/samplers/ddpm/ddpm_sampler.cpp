// ddpm: ancestral (DDPM-style) sampler.
#include <privdiff/components/sampler.hpp>
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace privdiff::plugins::ddpm {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class Ddpm : public Sampler {
 public:
  explicit Ddpm(const Config& config) : c_(config), steps_(config.get_int("steps")) {}

  at::Tensor sample(Model& model, const SampleRequest& request) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(request.seed);
    std::vector<std::int64_t> shape{request.count};
    for (auto d : model.sample_shape()) shape.push_back(d);
    const auto& params = model.module().parameters();
    const auto options = params.empty() ? at::TensorOptions().dtype(at::kFloat) : params.front().options().requires_grad(false);
    const at::Tensor noise = at::randn(shape, gen, at::TensorOptions().dtype(options.dtype())).to(options);
    const double w = request.guidance.value_or(c_.get_double("guidance"));
    return dm::ddim_sample(model, noise, request.labels, w, steps_, 1.0, c_.get_double("sigma_min"),
                           c_.get_double("sigma_max"), c_.get_double("rho"), gen);
  }

 private:
  Config c_;
  std::int64_t steps_;
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Ddpm>("ddpm", "ancestral (DDPM-style) sampler",
                        Schema{}
          .add(Key::integer("steps").at_least(1).defaults(1000).doc("number of noise levels"))
          .add(Key::number("guidance").at_least(0).defaults(0.0).doc("classifier-free guidance w: (1+w) D(x|y) - w D(x)"))
          .add(Key::number("sigma_min").greater_than(0).defaults(0.002).doc("smallest noise level"))
          .add(Key::number("sigma_max").greater_than(0).defaults(80.0).doc("largest noise level"))
          .add(Key::number("rho").greater_than(0).defaults(7.0).doc("Karras schedule exponent")));
}
}  // namespace

}  // namespace privdiff::plugins::ddpm

PRIVDIFF_PLUGIN("ddpm", "0.1.0", "ancestral (DDPM-style) sampler", privdiff::plugins::ddpm::register_components)
