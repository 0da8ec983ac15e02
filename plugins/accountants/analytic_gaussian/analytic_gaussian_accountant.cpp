// analytic_gaussian: the exact (eps, delta) curve of the Gaussian mechanism (Balle & Wang 2018)
// for compositions of non-subsampled Gaussian events, which compose exactly: noise multipliers
// s_1..s_n act as one Gaussian with 1/s^2 = sum 1/s_i^2. Subsampled events are refused: their
// curve is not a Gaussian one (use rdp or prv).
#include <privdiff/components/accountant.hpp>
#include <privdiff/config/value.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/analytic_gaussian.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace privdiff::plugins::analytic_gaussian {

using namespace privdiff::sdk;
namespace ag = privdiff::sdk::analytic_gaussian;

class AnalyticGaussianAccountant : public Accountant {
 public:
  explicit AnalyticGaussianAccountant(const Config&) {}

  std::string cannot_evaluate(const PrivacyEvent& event) const override {
    if (auto why = non_gaussian_reason(event); !why.empty()) return "analytic_gaussian " + why;
    for (const auto& steps : gaussian_steps(event)) {
      if (steps.sampling_rate < 1) {
        return "analytic_gaussian cannot evaluate Poisson-subsampled events (q = " +
               to_toml(ConfigValue{steps.sampling_rate}) + "): their privacy curve is not Gaussian; use rdp or prv";
      }
    }
    return "";
  }

  EpsilonResult epsilon(const PrivacyEvent& event, double delta) const override {
    if (!(delta > 0 && delta < 1)) throw std::invalid_argument("analytic_gaussian: delta must be in (0, 1)");
    const double sigma = effective_sigma(event);
    if (std::isinf(sigma)) return {0.0, {{"effective_noise_multiplier", sigma}}, {}};
    if (sigma == 0) return {std::numeric_limits<double>::infinity(), {{"effective_noise_multiplier", 0.0}}, {}};
    return {ag::epsilon(sigma, delta), {{"effective_noise_multiplier", sigma}}, {}};
  }

  double delta(const PrivacyEvent& event, double epsilon) const override {
    const double sigma = effective_sigma(event);
    if (std::isinf(sigma)) return 0;
    if (sigma == 0) return 1;
    return ag::delta(sigma, epsilon);
  }

 private:
  // The single noise multiplier equivalent to the whole composition.
  double effective_sigma(const PrivacyEvent& event) const {
    if (auto why = cannot_evaluate(event); !why.empty()) throw std::invalid_argument(why);
    double precision = 0;  // sum of 1/s^2 over all steps
    for (const auto& steps : gaussian_steps(event)) {
      precision += steps.noise_multiplier == 0 ? std::numeric_limits<double>::infinity()
                                               : static_cast<double>(steps.count) / (steps.noise_multiplier * steps.noise_multiplier);
    }
    return precision == 0 ? std::numeric_limits<double>::infinity() : 1 / std::sqrt(precision);
  }

};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<AnalyticGaussianAccountant>(
      "analytic_gaussian", "exact privacy curve of (composed, non-subsampled) Gaussian mechanisms", Schema{});
}
}  // namespace

}  // namespace privdiff::plugins::analytic_gaussian

PRIVDIFF_PLUGIN("analytic_gaussian", "0.1.0", "analytic Gaussian mechanism accountant",
                privdiff::plugins::analytic_gaussian::register_components)
