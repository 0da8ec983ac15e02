// prv: privacy-loss-random-variable accountant (Gopi, Lee & Wutschitz 2021) for compositions of
// (Poisson-subsampled) Gaussian events: lower bound, estimate and upper bound of epsilon, and an
// upper bound of delta(epsilon). The reported epsilon is the upper bound.
#include "prv_composition.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace privdiff::plugins::prv {

using namespace privdiff::sdk;
namespace rdp = privdiff::sdk::rdp;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// Collects the (q, sigma) -> count atoms of an event; returns false if some step has sigma = 0.
bool collect(const PrivacyEvent& e, std::int64_t times, std::map<std::pair<double, double>, std::int64_t>& atoms) {
  using Kind = PrivacyEvent::Kind;
  switch (e.kind()) {
    case Kind::no_op: return true;
    case Kind::gaussian:
      if (e.noise_multiplier() == 0) return false;
      atoms[{1.0, e.noise_multiplier()}] += times;
      return true;
    case Kind::poisson_sampled:
      if (e.sampling_rate() == 0 || e.inner().kind() == Kind::no_op) return true;
      if (e.inner().noise_multiplier() == 0) return false;
      atoms[{e.sampling_rate(), e.inner().noise_multiplier()}] += times;
      return true;
    case Kind::self_composed: return e.count() == 0 || collect(e.inner(), times * e.count(), atoms);
    case Kind::composed:
      for (const auto& c : e.children()) {
        if (!collect(c, times, atoms)) return false;
      }
      return true;
  }
  return false;
}

}  // namespace

class PrvAccountant : public Accountant {
 public:
  explicit PrvAccountant(const Config& config)
      : eps_error_(config.get_double("eps_error")),
        delta_error_(config.has("delta_error") ? config.get_double("delta_error") : -1) {}

  std::string cannot_evaluate(const PrivacyEvent& event) const override {
    const std::string why = rdp::cannot_evaluate(event);
    return why.empty() ? "" : "prv " + why;
  }

  EpsilonResult epsilon(const PrivacyEvent& event, double delta) const override {
    if (!(delta > 0 && delta < 1)) throw std::invalid_argument("prv: delta must be in (0, 1)");
    std::vector<PrvAtom> atoms;
    if (!atoms_of(event, atoms)) return {inf, {{"epsilon_lower", inf}, {"epsilon_estimate", inf}}, {}};
    if (atoms.empty()) return {0, {{"epsilon_lower", 0}, {"epsilon_estimate", 0}}, {}};
    const double delta_error = delta_error_ > 0 ? delta_error_ : delta / 1000;
    if (!(delta_error < delta)) {
      throw std::invalid_argument("prv: delta_error (" + std::to_string(delta_error) + ") must be below delta");
    }
    const PrvComposition composition(atoms, eps_error_, delta_error, {true, delta});
    const EpsilonBounds b = composition.epsilon_bounds(delta);
    return {b.upper,
            {{"epsilon_lower", b.lower},
             {"epsilon_estimate", b.estimate},
             {"eps_error", eps_error_},
             {"delta_error", delta_error},
             {"grid_points", static_cast<double>(composition.grid_size())}},
            {}};
  }

  double delta(const PrivacyEvent& event, double epsilon) const override {
    if (!(epsilon >= 0)) throw std::invalid_argument("prv: epsilon must be >= 0");
    std::vector<PrvAtom> atoms;
    if (!atoms_of(event, atoms)) return 1;
    if (atoms.empty()) return 0;
    // Without a delta to scale from, the domain is sized for delta_error (default 1e-12).
    const double delta_error = delta_error_ > 0 ? delta_error_ : 1e-12;
    return PrvComposition(atoms, eps_error_, delta_error, {false, epsilon}).delta_upper(epsilon);
  }

 private:
  bool atoms_of(const PrivacyEvent& event, std::vector<PrvAtom>& atoms) const {
    if (auto why = cannot_evaluate(event); !why.empty()) throw std::invalid_argument(why);
    std::map<std::pair<double, double>, std::int64_t> merged;
    if (!collect(event, 1, merged)) return false;
    for (const auto& [key, count] : merged) atoms.push_back({key.first, key.second, count});
    return true;
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
