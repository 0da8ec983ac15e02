// zcdp: a privacy accountant based on zero-concentrated differential privacy (Bun & Steinke 2016),
// the kind of small accountant a researcher adds to compare against RDP and PRV.
//
// Gaussian(s) with sensitivity 1 is rho = 1 / (2 s^2)-zCDP; compositions add rho; and rho-zCDP
// implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke, Prop. 1.3). zCDP has no
// useful amplification by Poisson subsampling, so PoissonSampled events are refused unless q = 1
// (or q = 0, which spends nothing).
#include <privdiff/components/accountant.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace {

using namespace privdiff::sdk;

class ZcdpAccountant : public Accountant {
 public:
  explicit ZcdpAccountant(const Config&) {}

  std::string cannot_evaluate(const PrivacyEvent& event) const override {
    if (auto why = non_gaussian_reason(event); !why.empty()) return "zcdp " + why;
    for (const auto& steps : gaussian_steps(event)) {
      if (steps.sampling_rate < 1) {
        return "zcdp cannot evaluate PoissonSampled events with 0 < q < 1 (zCDP does not amplify by "
               "subsampling); use rdp or prv";
      }
    }
    return "";
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

  // rho of the composition: Gaussian(s) is 1 / (2 s^2)-zCDP and compositions add.
  static double rho(const PrivacyEvent& event) {
    double sum = 0;
    for (const auto& steps : gaussian_steps(event)) {
      sum += steps.noise_multiplier == 0 ? std::numeric_limits<double>::infinity()
                                         : static_cast<double>(steps.count) / (2 * steps.noise_multiplier * steps.noise_multiplier);
    }
    return sum;
  }
};

void register_components(Registrar* registrar) {
  registrar->add<ZcdpAccountant>("zcdp", "zero-concentrated DP bound for (non-subsampled) Gaussian compositions",
                                 Schema{});
}

}  // namespace

PRIVDIFF_PLUGIN("zcdp", "0.1.0", "zCDP accountant (an example out-of-tree plugin)", register_components)
