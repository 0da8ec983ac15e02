#include <privdiff/diffusion/sampler_plugin.hpp>

#include <memory>
#include <stdexcept>
#include <utility>

namespace privdiff::sdk::diffusion {

namespace {

// The one KarrasSampler every rule-based sampler plugin registers: the rule is all that differs.
class RuleSampler final : public KarrasSampler {
 public:
  RuleSampler(const Config& config, KarrasUpdateRule rule) : KarrasSampler(config), rule_(rule) {}

 protected:
  at::Tensor integrate(Model& model, const at::Tensor& noise, const Conditioning& cond, double w,
                       at::Generator& generator) override {
    return rule_(KarrasRun{model, noise, cond, w, steps(), sigma_min(), sigma_max(), rho(), config(), generator});
  }

 private:
  KarrasUpdateRule rule_;
};

}  // namespace

void add_karras_sampler(Registrar& registrar, std::string id, std::string description, Schema schema,
                        KarrasUpdateRule rule) {
  if (!rule) throw std::invalid_argument("sampler '" + id + "': no update rule");
  registrar.add(ComponentRegistration{Sampler::kind, std::move(id), std::move(description), std::move(schema),
                                      [rule](const Config& config) -> std::unique_ptr<Component> {
                                        return std::make_unique<RuleSampler>(config, rule);
                                      }});
}

}  // namespace privdiff::sdk::diffusion
