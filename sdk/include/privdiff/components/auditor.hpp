#pragma once
/// @file
/// Auditor: turns the canary scores of one training run into an empirical lower bound on epsilon
/// (`privdiff audit --auditor ID`). Each canary was put in the training data independently with
/// probability 1/2; its score says how strongly the trained model (or the released gradients)
/// shows it. The built-in `one_run` auditor is Steinke, Nasr and Jagielski's one-run bound
/// (audit/one_run_bound.hpp); other bounds (f-DP one-run audits, other guessing rules) are plugins.

#include <privdiff/components/audit_result.hpp>
#include <privdiff/components/component.hpp>

#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API Auditor : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::auditor;
  ~Auditor() override;

  /// `scores[i]`: higher = canary i looks included; `included[i]`: the truth. Returns a lower bound
  /// on epsilon that holds with probability >= `confidence` for every (epsilon, delta)-DP algorithm
  /// (a bound above the accountant's epsilon is a failed audit).
  virtual AuditResult lower_bound(const std::vector<double>& scores, const std::vector<bool>& included,
                                               double delta, double confidence) const = 0;
};

}  // namespace privdiff::sdk
