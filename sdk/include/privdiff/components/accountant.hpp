#pragma once
/// @file
/// Accountant: turns privacy events into (epsilon, delta).

#include <privdiff/components/component.hpp>
#include <privdiff/components/privacy_event.hpp>

#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk {

/// An epsilon and the accountant-specific facts behind it, e.g. {"optimal_order", 32} for RDP
/// or {"epsilon_lower", ...} for PRV. `epsilon` is always an upper bound on the true epsilon.
struct EpsilonResult {
  double epsilon = 0.0;
  std::vector<std::pair<std::string, double>> details;
  /// Things the user should know about this number, e.g. an optimal RDP order at the edge of
  /// the order list (the epsilon is valid but may be loose).
  std::vector<std::string> warnings;
};

class PRIVDIFF_SDK_API Accountant : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::accountant;
  ~Accountant() override;

  /// Empty when this accountant can evaluate `event`; otherwise the reason, naming the event
  /// it cannot handle (e.g. "cannot evaluate PoissonSampled events: ...").
  virtual std::string cannot_evaluate(const PrivacyEvent& event) const = 0;
  /// Smallest epsilon it can certify for `event` at `delta` (0 < delta < 1). Throws
  /// std::invalid_argument when cannot_evaluate(event) is not empty.
  virtual EpsilonResult epsilon(const PrivacyEvent& event, double delta) const = 0;
  /// delta at `epsilon` (>= 0) for `event`. Same throwing rule.
  virtual double delta(const PrivacyEvent& event, double epsilon) const = 0;
  /// Whether epsilon() certifies an upper bound on the true epsilon (true for RDP, PRV, the analytic
  /// Gaussian). An approximation (a CLT or Edgeworth estimate, a PRV without its error bound) returns
  /// false: the host then refuses to calibrate noise with it or to publish its number as the guarantee
  /// unless the recipe opts in (`[privacy] allow_approximate_accountant = true`), and every report of
  /// the run carries a caveat. An accountant built before this existed may instead say "not an upper
  /// bound" in a warning of its EpsilonResult; the host treats that alike.
  virtual bool is_upper_bound() const;
};

}  // namespace privdiff::sdk
