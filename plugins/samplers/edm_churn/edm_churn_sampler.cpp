// edm_churn: stochastic EDM sampler with churn (Karras Alg. 2).
#include <privdiff/components/sampler.hpp>
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace privdiff::plugins::edm_churn {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class EdmChurn : public Sampler {
 public:
  explicit EdmChurn(const Config& config) : c_(config), steps_(config.get_int("steps")) {}

  at::Tensor sample(Model& model, const SampleRequest& request) override {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(request.seed);
    std::vector<std::int64_t> shape{request.count};
    for (auto d : model.sample_shape()) shape.push_back(d);
    const auto& params = model.module().parameters();
    const auto options = params.empty() ? at::TensorOptions().dtype(at::kFloat) : params.front().options().requires_grad(false);
    const at::Tensor noise = at::randn(shape, gen, at::TensorOptions().dtype(options.dtype())).to(options);
    const double w = request.guidance.value_or(c_.get_double("guidance"));
    dm::EdmSamplerOptions o{steps_, c_.get_double("sigma_min"), c_.get_double("sigma_max"), c_.get_double("rho"), true,
                            c_.get_double("s_churn"), c_.get_double("s_min"), c_.get_double("s_max"), c_.get_double("s_noise")};
    return dm::edm_sample(model, noise, request.labels, w, o, gen);
  }

 private:
  Config c_;
  std::int64_t steps_;
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<EdmChurn>("edm_churn", "stochastic EDM sampler with churn (Karras Alg. 2)",
                        Schema{}
          .add(Key::integer("steps").at_least(1).defaults(256).doc("number of noise levels"))
          .add(Key::number("guidance").at_least(0).defaults(0.0).doc("classifier-free guidance w: (1+w) D(x|y) - w D(x)"))
          .add(Key::number("sigma_min").greater_than(0).defaults(0.002).doc("smallest noise level"))
          .add(Key::number("sigma_max").greater_than(0).defaults(80.0).doc("largest noise level"))
          .add(Key::number("rho").greater_than(0).defaults(7.0).doc("Karras schedule exponent"))
          .add(Key::number("s_churn").at_least(0).defaults(50.0).doc("total churn"))
          .add(Key::number("s_min").at_least(0).defaults(0.05).doc("churn only for sigma >= s_min"))
          .add(Key::number("s_max").at_least(0).defaults(50.0).doc("churn only for sigma <= s_max"))
          .add(Key::number("s_noise").greater_than(0).defaults(1.003).doc("noise inflation of the churn")));
}
}  // namespace

}  // namespace privdiff::plugins::edm_churn

PRIVDIFF_PLUGIN("edm_churn", "0.1.0", "stochastic EDM sampler with churn (Karras Alg. 2)", privdiff::plugins::edm_churn::register_components)
