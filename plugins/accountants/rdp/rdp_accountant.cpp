// rdp: Rényi-DP accountant for (Poisson-subsampled) Gaussian events, exact at integer and
// fractional orders (see privdiff/privacy/rdp.hpp), with the improved RDP -> (eps, delta)
// conversion by default and the classic one selectable.
#include <privdiff/components/accountant.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <sstream>
#include <stdexcept>

namespace privdiff::plugins::rdp {

using namespace privdiff::sdk;
namespace r = privdiff::sdk::rdp;

class RdpAccountant : public Accountant {
 public:
  explicit RdpAccountant(const Config& config)
      : orders_(config.has("orders") ? config.get_double_list("orders") : r::default_orders()),
        conversion_(config.get_string("conversion") == "classic" ? r::Conversion::classic : r::Conversion::improved) {
    if (orders_.empty()) throw std::invalid_argument("orders: give at least one order");
  }

  std::string cannot_evaluate(const PrivacyEvent& event) const override {
    const std::string why = r::cannot_evaluate(event);
    return why.empty() ? "" : "rdp " + why;
  }

  EpsilonResult epsilon(const PrivacyEvent& event, double delta) const override {
    const auto best = r::epsilon(orders_, r::event_rdp(event, orders_), delta, conversion_);
    EpsilonResult result{best.epsilon, {{"optimal_order", best.order}}, {}};
    if (orders_.size() > 1 && best.epsilon > 0 && (best.order == orders_.front() || best.order == orders_.back())) {
      std::ostringstream os;
      os << "the optimal RDP order " << best.order << " is at the edge of the order list ["
         << orders_.front() << ", " << orders_.back() << "]; epsilon is valid but may be loose (a recipe can "
         << "widen the list with [accountants.rdp] orders; privdiff account uses the default list)";
      result.warnings.push_back(os.str());
    }
    return result;
  }

  double delta(const PrivacyEvent& event, double epsilon) const override {
    return r::delta(orders_, r::event_rdp(event, orders_), epsilon, conversion_);
  }

 private:
  std::vector<double> orders_;
  r::Conversion conversion_;
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<RdpAccountant>(
      "rdp", "Rényi DP of subsampled Gaussians, exact at integer and fractional orders",
      Schema{}
          .add(Key::number_list("orders").greater_than(1).optional()
                   .doc("RDP orders to optimise over; default 1.1..10.9 (step 0.1), 11..64, 80, ..., 1024"))
          .add(Key::string("conversion").one_of({"improved", "classic"}).defaults("improved")
                   .doc("RDP -> (eps, delta): improved (Balle et al. 2020) or classic (Mironov 2017, "
                        "for older published numbers)")));
}
}  // namespace

}  // namespace privdiff::plugins::rdp

PRIVDIFF_PLUGIN("rdp", "0.1.0", "Rényi DP accountant", privdiff::plugins::rdp::register_components)
