#include <privdiff/privacy/rdp_accountant.hpp>

#include <sstream>
#include <stdexcept>
#include <utility>

namespace privdiff::sdk {

namespace r = privdiff::sdk::rdp;

RdpAccountant::RdpAccountant() : RdpAccountant(r::default_orders(), r::Conversion::improved) {}

RdpAccountant::RdpAccountant(std::vector<double> orders, r::Conversion conversion)
    : orders_(std::move(orders)), conversion_(conversion) {
  if (orders_.empty()) throw std::invalid_argument("orders: give at least one order");
}

RdpAccountant::RdpAccountant(const Config& config)
    : RdpAccountant(config.has("orders") ? config.get_double_list("orders") : r::default_orders(),
                    config.get_string("conversion") == "classic" ? r::Conversion::classic : r::Conversion::improved) {}

std::string RdpAccountant::cannot_evaluate(const PrivacyEvent& event) const {
  const std::string why = r::cannot_evaluate(event);
  return why.empty() ? "" : "rdp " + why;
}

EpsilonResult RdpAccountant::epsilon(const PrivacyEvent& event, double delta) const {
  const auto best = r::epsilon(orders_, r::event_rdp(event, orders_), delta, conversion_);
  EpsilonResult result{best.epsilon, {{"optimal_order", best.order}}, {}};
  if (orders_.size() > 1 && best.epsilon > 0 && (best.order == orders_.front() || best.order == orders_.back())) {
    std::ostringstream os;
    os << "the optimal RDP order " << best.order << " is at the edge of the order list [" << orders_.front() << ", "
       << orders_.back() << "]; epsilon is valid but may be loose (a recipe can widen the list with [accountants.rdp] "
       << "orders; privdiff account uses the default list)";
    result.warnings.push_back(os.str());
  }
  return result;
}

double RdpAccountant::delta(const PrivacyEvent& event, double epsilon) const {
  return r::delta(orders_, r::event_rdp(event, orders_), epsilon, conversion_);
}

Schema rdp_accountant_schema() {
  return Schema{}
      .add(Key::number_list("orders").greater_than(1).optional()
               .doc("RDP orders to optimise over; default 1.1..10.9 (step 0.1), 11..64, 80, ..., 1024"))
      .add(Key::string("conversion").one_of({"improved", "classic"}).defaults("improved")
               .doc("RDP -> (eps, delta): improved (Balle et al. 2020) or classic (Mironov 2017, for older "
                    "published numbers)"));
}

}  // namespace privdiff::sdk
