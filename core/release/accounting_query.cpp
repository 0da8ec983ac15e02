#include "release/accounting_query.hpp"

#include "recipe/suggest.hpp"
#include "release/privacy_statement.hpp"
#include "util/usage_error.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/privacy/calibration.hpp>

#include <map>
#include <stdexcept>
#include <memory>

namespace privdiff::core::release {

namespace {

using sdk::PrivacyEvent;

struct Target {
  std::string id;
  std::unique_ptr<sdk::Accountant> accountant;
};

std::vector<Target> make_accountants(const ComponentRegistry& registry, const AccountingQuestion& q) {
  const auto ids = q.accountants.empty() ? registry.ids(sdk::ComponentKind::accountant) : q.accountants;
  if (ids.empty()) throw std::runtime_error("no accountant plugins are installed (see `privdiff plugins list`)");
  std::vector<Target> out;
  for (const auto& id : ids) {
    auto found = registry.find(sdk::ComponentKind::accountant, id);
    if (!found) {
      const auto available = registry.ids(sdk::ComponentKind::accountant);
      const std::string hint = registry.refused_hint(id);
      throw UsageError("--accountant: unknown accountant '" + id + "'" + did_you_mean(id, available) +
                       "; available accountants: " + join(available) + (hint.empty() ? "" : "; " + hint));
    }
    std::map<std::string, sdk::ConfigValue> values;
    if (found->registration->schema.find("conversion")) values["conversion"] = q.conversion;
    const sdk::Config config = sdk::make_config(found->registration->schema, "accountants." + id, values);
    out.push_back({id, create_component<sdk::Accountant>(registry, id, config)});
  }
  return out;
}

// One accountant's figure, marked where it is no upper bound (the gate's judgement, as for a run's).
nlohmann::json result_json(const Target& t, const sdk::EpsilonResult& r, double delta) {
  nlohmann::json j = {{"accountant", t.id}, {"epsilon", r.epsilon}, {"delta", delta}};
  for (const auto& [k, v] : r.details) j[k] = v;
  std::vector<std::string> warnings = r.warnings;
  if (!certifies_upper_bound(*t.accountant, r)) {
    j["upper_bound"] = false;
    warnings.push_back(t.id + " is an approximation, not an upper bound on epsilon: a run refuses it as its "
                       "calibrating accountant unless [privacy] allow_approximate_accountant = true");
  }
  if (!warnings.empty()) j["warnings"] = warnings;
  return j;
}

nlohmann::json evaluate(const Target& t, const AccountingQuestion& q) {
  if (q.calibrate) {
    const double tolerance = q.calibrate->tolerance.value_or(t.id == "prv" ? 1e-4 : 1e-10);
    auto events = [&](double sigma) { return then_schedule(q.spent, *q.calibrate, sigma); };
    sdk::NoiseCalibration c;
    try {
      c = sdk::calibrate_noise_multiplier(*t.accountant, events, q.calibrate->target_epsilon, q.delta, tolerance);
    } catch (const std::invalid_argument& e) {  // a target none worth meeting, events it cannot evaluate
      throw UsageError(t.id + ": " + e.what());
    } catch (const std::runtime_error& e) {  // a target no noise meets: the question, not the work, is wrong
      throw UsageError(t.id + ": " + e.what());
    }
    nlohmann::json j = result_json(t, t.accountant->epsilon(events(c.noise_multiplier), q.delta), q.delta);
    j["noise_multiplier"] = c.noise_multiplier;
    return j;
  }
  if (q.epsilon) {
    // Accountant::delta returns a bare number: the warnings of epsilon at that delta (the same event:
    // an RDP order at the edge of its list, an approximation) are what the user must see. Its details
    // describe that epsilon, not this delta, and stay out.
    const double delta = t.accountant->delta(q.spent, *q.epsilon);
    sdk::EpsilonResult r{*q.epsilon, {}, {}};
    if (delta > 0 && delta < 1) r.warnings = t.accountant->epsilon(q.spent, delta).warnings;
    return result_json(t, r, delta);
  }
  return result_json(t, t.accountant->epsilon(q.spent, q.delta), q.delta);
}

}  // namespace

PrivacyEvent then_schedule(const PrivacyEvent& spent, const CalibratedSchedule& schedule, double sigma) {
  const PrivacyEvent final_schedule = PrivacyEvent::self_composed(
      PrivacyEvent::poisson_sampled(schedule.sample_rate, PrivacyEvent::gaussian(sigma)), schedule.steps);
  if (spent.kind() == PrivacyEvent::Kind::no_op) return final_schedule;
  return PrivacyEvent::composed({spent, final_schedule});
}

AccountingAnswer answer(const ComponentRegistry& registry, const AccountingQuestion& q) {
  // Accountants named explicitly must handle the events; from the default set, those that cannot are
  // skipped with the reason.
  const PrivacyEvent probe = q.calibrate ? then_schedule(q.spent, *q.calibrate, 1.0) : q.spent;
  AccountingAnswer a;
  std::vector<Target> usable;
  for (auto& t : make_accountants(registry, q)) {
    const std::string why = t.accountant->cannot_evaluate(probe);
    if (why.empty()) {
      usable.push_back(std::move(t));
    } else if (!q.accountants.empty()) {
      throw UsageError("--accountant " + t.id + ": " + why);
    } else {
      a.skipped.push_back({{"accountant", t.id}, {"reason", why}});
    }
  }
  if (usable.empty()) throw UsageError("no installed accountant can evaluate these events");
  bool question_wrong = true;  // every failure a UsageError: the question, not the work, is wrong
  for (auto& t : usable) {
    try {
      a.results.push_back(evaluate(t, q));
    } catch (const std::exception& e) {
      if (!q.accountants.empty()) throw;  // asked for by name: its failure is the command's
      question_wrong = question_wrong && dynamic_cast<const UsageError*>(&e) != nullptr;
      a.skipped.push_back({{"accountant", t.id}, {"reason", e.what()}});
    }
  }
  if (a.results.empty()) {
    std::string reasons;
    for (const auto& skipped : a.skipped) {  // each one's reason, those that could not evaluate the events too
      const std::string id = skipped["accountant"], reason = skipped["reason"];
      reasons += (reasons.empty() ? "" : "; ") + (reason.rfind(id, 0) == 0 ? reason : id + ": " + reason);
    }
    const std::string message = "no accountant could answer: " + reasons;
    if (question_wrong) throw UsageError(message);
    throw std::runtime_error(message);
  }
  return a;
}

}  // namespace privdiff::core::release
