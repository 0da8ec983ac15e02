// prv: privacy-loss-random-variable accountant (Gopi, Lee & Wutschitz 2021) for compositions of
// (Poisson-subsampled) Gaussian events: lower bound, estimate and upper bound of epsilon, and an
// upper bound of delta(epsilon). The reported epsilon is the upper bound.
#include <privdiff/components/accountant.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>
#include <privdiff/privacy/prv_composition.hpp>

#include <cmath>
#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>

namespace privdiff::plugins::prv {

using namespace privdiff::sdk;
using sdk::prv::EpsilonBounds;
using sdk::prv::PrvComposition;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
// The most points a refined grid may have (a few seconds of FFTs, 0.4 GB).
constexpr double refined_cells = 1 << 24;

}  // namespace

class PrvAccountant : public Accountant {
 public:
  explicit PrvAccountant(const Config& config)
      : eps_error_(config.get_double("eps_error")),
        delta_error_(config.has("delta_error") ? config.get_double("delta_error") : -1) {}

  std::string cannot_evaluate(const PrivacyEvent& event) const override {
    const std::string why = non_gaussian_reason(event);
    return why.empty() ? "" : "prv " + why;
  }

  EpsilonResult epsilon(const PrivacyEvent& event, double delta) const override {
    if (!(delta > 0 && delta < 1)) throw std::invalid_argument("prv: delta must be in (0, 1)");
    const auto atoms = steps_of(event);
    if (has_noiseless_step(atoms)) return {inf, {{"epsilon_lower", inf}, {"epsilon_estimate", inf}}, {}};
    if (atoms.empty()) return {0, {{"epsilon_lower", 0}, {"epsilon_estimate", 0}}, {}};
    const double delta_error = delta_error_ > 0 ? delta_error_ : delta / 1000;
    if (!(delta_error < delta)) {
      throw std::invalid_argument("prv: delta_error (" + std::to_string(delta_error) + ") must be below delta");
    }
    // eps_error is absolute: where epsilon is small against it, the upper bound would be mostly
    // discretisation error (0.016 for an estimate of 0.006). There the grid is refined to a relative
    // error of 1% of the estimate: at most 1000 times finer, and to at most refined_cells points
    // (the grid's size grows as 1/eps_error; a coarser grid's upper bound is looser, never wrong).
    auto compose = [&](double eps_error) {
      return std::make_unique<PrvComposition>(atoms, eps_error, delta_error, PrvComposition::Question{true, delta});
    };
    double eps_error = eps_error_;
    auto composition = compose(eps_error);
    EpsilonBounds b = composition->epsilon_bounds(delta);
    const double finest = eps_error_ * 2 * static_cast<double>(composition->grid_size()) / refined_cells;
    const double refined = std::max({eps_error_ / 1000, 0.01 * b.estimate, finest});
    if (b.estimate < 10 * eps_error_ && refined < eps_error_ / 2) {
      eps_error = refined;
      composition = compose(eps_error);
      b = composition->epsilon_bounds(delta);
    }
    return {b.upper,
            {{"epsilon_lower", b.lower},
             {"epsilon_estimate", b.estimate},
             {"eps_error", eps_error},
             {"delta_error", delta_error},
             {"grid_points", static_cast<double>(composition->grid_size())}},
            {}};
  }

  double delta(const PrivacyEvent& event, double epsilon) const override {
    if (!(epsilon >= 0)) throw std::invalid_argument("prv: epsilon must be >= 0");
    const auto atoms = steps_of(event);
    if (has_noiseless_step(atoms)) return 1;
    if (atoms.empty()) return 0;
    // Without a delta to scale from, the domain is sized for delta_error (default 1e-12).
    const double delta_error = delta_error_ > 0 ? delta_error_ : 1e-12;
    return PrvComposition(atoms, eps_error_, delta_error, {false, epsilon}).delta_upper(epsilon);
  }

 private:
  std::vector<GaussianSteps> steps_of(const PrivacyEvent& event) const {
    if (auto why = cannot_evaluate(event); !why.empty()) throw std::invalid_argument(why);
    return gaussian_steps(event);
  }

  // A step without noise has no privacy at all: epsilon infinite, delta 1.
  static bool has_noiseless_step(const std::vector<GaussianSteps>& steps) {
    for (const auto& s : steps) {
      if (s.noise_multiplier == 0) return true;
    }
    return false;
  }

  double eps_error_;
  double delta_error_;  // <= 0: delta / 1000
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<PrvAccountant>(
      "prv", "PRV accountant (Gopi et al. 2021): epsilon with lower/upper bounds, FFT composition",
      Schema{}
          .add(Key::number("eps_error").greater_than(0).at_most(10).defaults(0.01)
                   .doc("width of the epsilon error band (sets the grid mesh)"))
          .add(Key::number("delta_error").greater_than(0).less_than(1).optional()
                   .doc("delta error (sets the domain); default delta / 1000, or 1e-12 for delta(eps) queries")));
}
}  // namespace

}  // namespace privdiff::plugins::prv

PRIVDIFF_PLUGIN("prv", "0.1.0", "PRV accountant", privdiff::plugins::prv::register_components)
