// dpdm: DP-SGD with noise multiplicity (Dockhorn et al.): each example's loss averages K noised
// copies before its gradient is clipped, so the sensitivity stays C while the gradient variance
// falls as 1/K. The privacy cost is that of dpsgd with the same sigma, q and steps.
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::dpdm {

using namespace privdiff::sdk;

class Dpdm : public engine::DpSgdMechanism {
 public:
  explicit Dpdm(const Config& config) : DpSgdMechanism(engine::dp_sgd_options(config, true)) {}
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Dpdm>("dpdm", "DP-SGD with noise multiplicity K: K noised copies averaged before per-example clipping",
                       engine::dp_sgd_schema(true, true));
}
}  // namespace

}  // namespace privdiff::plugins::dpdm

PRIVDIFF_PLUGIN("dpdm", "0.1.0", "DPDM's noise-multiplicity mechanism", privdiff::plugins::dpdm::register_components)
