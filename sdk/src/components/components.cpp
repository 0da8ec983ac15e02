// Out-of-line destructors (one vtable and typeinfo per interface, exported from the SDK) and the
// default behaviours of the component interfaces.
#include <privdiff/components/accountant.hpp>
#include <privdiff/components/adapter.hpp>
#include <privdiff/components/auditor.hpp>
#include <privdiff/components/component.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/components/sampler.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/evaluator.hpp>

#include <stdexcept>

namespace privdiff::sdk {

std::string to_string(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::model: return "model";
    case ComponentKind::adapter: return "adapter";
    case ComponentKind::mechanism: return "mechanism";
    case ComponentKind::accountant: return "accountant";
    case ComponentKind::sampler: return "sampler";
    case ComponentKind::dataset: return "dataset";
    case ComponentKind::evaluator: return "evaluator";
    case ComponentKind::auditor: return "auditor";
  }
  return "?";
}

std::string plural(ComponentKind kind) { return to_string(kind) + "s"; }

Component::~Component() = default;
Model::~Model() = default;
Adapter::~Adapter() = default;
Mechanism::~Mechanism() = default;
Accountant::~Accountant() = default;
bool Accountant::is_upper_bound() const { return true; }
Sampler::~Sampler() = default;
Dataset::~Dataset() = default;
Evaluator::~Evaluator() = default;
std::vector<std::string> Evaluator::metric_names() const { return {}; }
Auditor::~Auditor() = default;

PrivacyEvent Mechanism::planned_events_with(double, std::int64_t) const {
  throw std::logic_error("this mechanism has no tunable noise multiplier");
}

void Mechanism::select_trainable(Model& model) const {
  for (auto& p : model.module().parameters()) p.set_requires_grad(true);
}

void Mechanism::set_noise_multiplier(double) {
  throw std::logic_error("this mechanism has no tunable noise multiplier");
}

}  // namespace privdiff::sdk
