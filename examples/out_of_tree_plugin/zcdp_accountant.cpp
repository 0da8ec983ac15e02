// zcdp: a privacy accountant based on zero-concentrated differential privacy (Bun & Steinke 2016),
// the kind of small accountant a researcher adds to compare against RDP and PRV.
//
// Gaussian(s) with sensitivity 1 is rho = 1 / (2 s^2)-zCDP; compositions add rho; and rho-zCDP
// implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke, Prop. 1.3). zCDP has no
// useful amplification by Poisson subsampling, so PoissonSampled events are refused unless q = 1
// (or q = 0, which spends nothing).
#include <privdiff/components/accountant.hpp>
#include <privdiff/plugin/export.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace {

using namespace privdiff::sdk;

class ZcdpAccountant : public Accountant {
 public:
  explicit ZcdpAccountant(const Config&) {}

  std::string cannot_evaluate(const PrivacyEvent& event) const override {
    switch (event.kind()) {
      case PrivacyEvent::Kind::no_op:
      case PrivacyEvent::Kind::gaussian: return "";
      case PrivacyEvent::Kind::poisson_sampled:
        if (event.sampling_rate() == 0 || event.sampling_rate() == 1) return cannot_evaluate(event.inner());
        return "zcdp cannot evaluate PoissonSampled events with 0 < q < 1 (zCDP does not amplify by "
               "subsampling); use rdp or prv";
      case PrivacyEvent::Kind::self_composed: return cannot_evaluate(event.inner());
      case PrivacyEvent::Kind::composed:
        for (const auto& child : event.children()) {
          if (auto why = cannot_evaluate(child); !why.empty()) return why;
        }
        return "";
    }
    return "zcdp: unknown event";
  }

  EpsilonResult epsilon(const PrivacyEvent& event, double delta) const override {
    check(event);
    if (!(delta > 0 && delta < 1)) throw std::invalid_argument("zcdp: delta must be in (0, 1)");
    const double r = rho(event);
    return {r + 2 * std::sqrt(r * std::log(1 / delta)), {{"rho", r}}};
  }

  double delta(const PrivacyEvent& event, double epsilon) const override {
    check(event);
    if (!(epsilon >= 0)) throw std::invalid_argument("zcdp: epsilon must be >= 0");
    const double r = rho(event);
    if (r == 0) return 0;
    if (epsilon <= r) return 1;
    // Inverse of epsilon = rho + 2 sqrt(rho ln(1/delta)).
    return std::exp(-(epsilon - r) * (epsilon - r) / (4 * r));
  }

 private:
  void check(const PrivacyEvent& event) const {
    if (auto why = cannot_evaluate(event); !why.empty()) throw std::invalid_argument(why);
  }

  static double rho(const PrivacyEvent& e) {
    switch (e.kind()) {
      case PrivacyEvent::Kind::no_op: return 0;
      case PrivacyEvent::Kind::gaussian:
        return e.noise_multiplier() == 0 ? std::numeric_limits<double>::infinity()
                                         : 1 / (2 * e.noise_multiplier() * e.noise_multiplier());
      case PrivacyEvent::Kind::poisson_sampled: return e.sampling_rate() == 0 ? 0 : rho(e.inner());
      case PrivacyEvent::Kind::self_composed: return static_cast<double>(e.count()) * rho(e.inner());
      case PrivacyEvent::Kind::composed: {
        double sum = 0;
        for (const auto& c : e.children()) sum += rho(c);
        return sum;
      }
    }
    return std::numeric_limits<double>::infinity();
  }
};

void register_components(Registrar* registrar) {
  registrar->add<ZcdpAccountant>("zcdp", "zero-concentrated DP bound for (non-subsampled) Gaussian compositions",
                                 Schema{});
}

}  // namespace

PRIVDIFF_PLUGIN("zcdp", "0.1.0", "zCDP accountant (an example out-of-tree plugin)", register_components)
