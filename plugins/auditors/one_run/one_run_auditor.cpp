// one_run: Steinke, Nasr and Jagielski's one-run audit bound (NeurIPS 2023) over the SDK's
// guessing rules (audit/one_run_bound.hpp): the k highest scores guessed in, optionally the k lowest
// guessed out, for k on a fixed grid, Bonferroni-corrected.
#include <privdiff/audit/one_run_bound.hpp>
#include <privdiff/components/auditor.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::one_run {

using namespace privdiff::sdk;

class OneRunAuditor : public Auditor {
 public:
  explicit OneRunAuditor(const Config&) {}
  AuditResult lower_bound(const std::vector<double>& scores, const std::vector<bool>& included,
                                       double delta, double confidence) const override {
    return audit::audit_canary_scores(scores, included, delta, confidence);
  }
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<OneRunAuditor>("one_run", "one-run audit bound (Steinke, Nasr, Jagielski 2023) on canary scores",
                                Schema{});
}
}  // namespace

}  // namespace privdiff::plugins::one_run

PRIVDIFF_PLUGIN("one_run", "0.1.0", "One-run privacy audit bound", privdiff::plugins::one_run::register_components)
