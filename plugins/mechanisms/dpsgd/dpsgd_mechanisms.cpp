// dpsgd: DP-SGD (Abadi et al. 2016) with Poisson sampling, per-example clipping, Gaussian noise
// once per logical step and RDP/PRV-ready ledger entries; and nonprivate: the same loop without
// clipping or noise, for public pretraining stages (it refuses data not marked public).
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::dpsgd {

using namespace privdiff::sdk;
using engine::DpSgdMechanism;

class DpSgd : public DpSgdMechanism {
 public:
  explicit DpSgd(const Config& config) : DpSgdMechanism(engine::dp_sgd_options(config, true)) {}
};

class NonPrivate : public DpSgdMechanism {
 public:
  explicit NonPrivate(const Config& config) : DpSgdMechanism(engine::dp_sgd_options(config, false)) {}
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<DpSgd>("dpsgd", "DP-SGD: Poisson sampling, per-example clipping, Gaussian noise per logical step",
                        engine::dp_sgd_schema(true, false));
  registrar->add<NonPrivate>("nonprivate", "non-private training on public data (same loop, no clipping or noise)",
                             engine::dp_sgd_schema(false, false));
}
}  // namespace

}  // namespace privdiff::plugins::dpsgd

PRIVDIFF_PLUGIN("dpsgd", "0.1.0", "DP-SGD and non-private training mechanisms",
                privdiff::plugins::dpsgd::register_components)
