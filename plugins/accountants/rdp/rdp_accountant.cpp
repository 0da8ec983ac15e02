// rdp: Rényi-DP accountant for (Poisson-subsampled) Gaussian events, exact at integer and
// fractional orders (privdiff/privacy/rdp.hpp), with the improved RDP -> (eps, delta) conversion by
// default and the classic one selectable. The accountant itself is the SDK's RdpAccountant
// (privacy/rdp_accountant.hpp), which standalone programs and plugin tests use without plugins.
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/rdp_accountant.hpp>

namespace privdiff::plugins::rdp {

namespace {
void register_components(sdk::Registrar* registrar) {
  registrar->add<sdk::RdpAccountant>("rdp", "Rényi DP of subsampled Gaussians, exact at integer and fractional orders",
                                     sdk::rdp_accountant_schema());
}
}  // namespace

}  // namespace privdiff::plugins::rdp

PRIVDIFF_PLUGIN("rdp", "0.1.0", "Rényi DP accountant", privdiff::plugins::rdp::register_components)
