// Pre-flight, privacy: compose what every stage plans to spend (with what init_from carries), calibrate
// the one noise_multiplier = "auto" stage, refuse a plan over the target, and warn where the noise will
// drown the signal or delta is too large.
#include "run/run_session.hpp"

#include "recipe/diagnostic.hpp"
#include "release/privacy_statement.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/privacy/calibration.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <cmath>
#include <functional>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// The accountant's epsilon of `parts` composed; where it cannot evaluate them (PRV's grid cannot hold
// the privacy loss of a noise far too small for any target), `blame` is told which part it cannot
// evaluate on its own, and why: the user's to change, rather than the accountant's grid.
sdk::EpsilonResult epsilon_naming_part(const sdk::Accountant& accountant, const std::vector<sdk::PrivacyEvent>& parts,
                                       double delta, const std::function<void(std::size_t, const std::string&)>& blame) {
  const sdk::PrivacyEvent composed = sdk::PrivacyEvent::composed(parts);
  // Events of a kind the accountant does not handle at all: its own reason, nobody's noise.
  if (auto why = accountant.cannot_evaluate(composed); !why.empty()) throw std::runtime_error("privacy.accountant: " + why);
  try {
    return accountant.epsilon(composed, delta);
  } catch (const std::exception&) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].kind() == sdk::PrivacyEvent::Kind::no_op) continue;
      try {
        accountant.epsilon(parts[i], delta);
      } catch (const std::exception& e) {
        blame(i, e.what());
      }
    }
    throw;
  }
}

}  // namespace

sdk::PrivacyEvent RunOrchestrator::plan_privacy(RunSession& s) {
  auto& mechanisms = components_.mechanisms;
  std::ostream& log = s.log;
  // What an init_from source spent on this run's private data counts against the target too.
  const sdk::PrivacyEvent carried = s.carry ? s.init->ledger.total() : sdk::PrivacyEvent::no_op();
  if (!any_private(components_)) {
    if (s.carry && !s.init->ledger.entries().empty() && !recipe_.privacy.has("delta")) {
      throw std::runtime_error("privacy: the initial model (run.init_from) spent privacy; set [privacy] delta (and "
                               "epsilon) so this run reports it");
    }
    return carried;
  }
  if (!recipe_.privacy.has("epsilon") || !recipe_.privacy.has("delta")) {
    throw std::runtime_error("privacy: this recipe has private stages; set [privacy] epsilon and delta");
  }
  const double target = recipe_.privacy.get_double("epsilon");
  const double delta = recipe_.privacy.get_double("delta");
  const sdk::Accountant& accountant = main_accountant();
  warn_about_delta(s, delta);

  std::size_t auto_stage = mechanisms.size();
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    if (!mechanisms[i]->needs_calibration()) continue;
    if (auto_stage != mechanisms.size()) {
      throw std::runtime_error("stage[" + std::to_string(i) + "].noise_multiplier: only one stage may use \"auto\" (stage[" +
                               std::to_string(auto_stage) + "] already does)");
    }
    auto_stage = i;
  }
  if (auto_stage != mechanisms.size()) calibrate_auto_stage(s, auto_stage, carried, target, delta);
  std::vector<sdk::PrivacyEvent> events{carried};
  for (std::size_t i = 0; i < mechanisms.size(); ++i) events.push_back(mechanisms[i]->planned_events(s.stage_size(i)));
  const sdk::PrivacyEvent total = sdk::PrivacyEvent::composed(events);
  const sdk::EpsilonResult planned_result = epsilon_naming_part(accountant, events, delta, [&](std::size_t j, const std::string& why) {
    blame_unaccountable(j == 0 ? mechanisms.size() : j - 1, why);  // events: init_from's, then each stage's
  });
  const double planned_epsilon = planned_result.epsilon;
  approximate_guarantee_ = !release::certifies_upper_bound(accountant, planned_result);
  if (approximate_guarantee_ && !approximation_allowed()) {
    throw std::runtime_error("privacy.accountant: '" + recipe_.privacy.get_string("accountant") + "' does not certify "
                             "an upper bound on epsilon (an approximation), so noise calibrated with it may not meet "
                             "the target; use an accountant that does (rdp, prv, analytic_gaussian), or set [privacy] "
                             "allow_approximate_accountant = true (every report then carries a caveat)");
  }
  if (approximate_guarantee_) {
    log << "warning: privacy.accountant '" << recipe_.privacy.get_string("accountant") << "' is an approximation, "
        << "not an upper bound: the run's guarantee carries a caveat\n";
  }
  if (planned_epsilon > target) {
    throw std::runtime_error("privacy: the stages plan to spend epsilon " + format_epsilon(planned_epsilon) +
                             " at delta " + format_epsilon(delta) + ", over the target " + format_epsilon(target) +
                             " by " + format_epsilon(planned_epsilon - target) +
                             "; raise noise_multiplier, lower the steps or the batch size, or use \"auto\"");
  }
  log << "planned privacy: epsilon " << format_epsilon(planned_epsilon) << " of " << target << " ("
      << recipe_.privacy.get_string("accountant") << ", delta " << delta << ")\n";
  log_stage_shares(s, accountant, delta, events);
  return total;
}

void RunOrchestrator::blame_unaccountable(std::size_t stage, const std::string& why) const {
  const std::string problem = "spends more than " + recipe_.privacy.get_string("accountant") + " can account (" + why +
                              "): too little noise (or too many steps) for any target epsilon";
  if (stage == components_.mechanisms.size()) throw std::runtime_error("run.init_from: its ledger " + problem);
  const sdk::Config& config = recipe_.stages[stage].mechanism.config;
  throw RecipeError({recipe_.diagnostic(config.path() + (config.has("noise_multiplier") ? ".noise_multiplier" : ""), problem)});
}

void RunOrchestrator::calibrate_auto_stage(RunSession& s, std::size_t auto_stage, const sdk::PrivacyEvent& carried,
                                           double target, double delta) {
  auto& mechanisms = components_.mechanisms;
  const sdk::Accountant& accountant = main_accountant();
  // Everything the run plans to spend, with stage `auto_stage` at noise multiplier sigma.
  auto planned = [&](double sigma) {
    std::vector<sdk::PrivacyEvent> events;
    for (std::size_t i = 0; i < mechanisms.size(); ++i) {
      events.push_back(i == auto_stage ? mechanisms[i]->planned_events_with(sigma, s.stage_size(i))
                                       : mechanisms[i]->planned_events(s.stage_size(i)));
    }
    events.push_back(carried);
    return sdk::PrivacyEvent::composed(std::move(events));
  };
  std::vector<sdk::PrivacyEvent> others{carried};
  std::vector<std::size_t> stage_of{mechanisms.size()};  // others[j] is stage stage_of[j]'s (init_from's first)
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    if (i == auto_stage) continue;
    others.push_back(mechanisms[i]->planned_events(s.stage_size(i)));
    stage_of.push_back(i);
  }
  const double others_epsilon =
      epsilon_naming_part(accountant, others, delta, [&](std::size_t j, const std::string& why) { blame_unaccountable(stage_of[j], why); })
          .epsilon;
  if (!(others_epsilon < target)) {
    throw std::runtime_error("privacy: the stages other than '" + recipe_.stages[auto_stage].name + "'" +
                             (s.carry ? " and the initial model (run.init_from)" : "") + " already spend epsilon " +
                             format_epsilon(others_epsilon) + " of the target " + format_epsilon(target) +
                             "; nothing is left to calibrate its noise multiplier against");
  }
  const auto calibration = sdk::calibrate_noise_multiplier(accountant, planned, target, delta);
  mechanisms[auto_stage]->set_noise_multiplier(calibration.noise_multiplier);
  s.log << "calibrated stage '" << recipe_.stages[auto_stage].name << "' noise multiplier to "
        << calibration.noise_multiplier << " (epsilon " << format_epsilon(calibration.epsilon) << " <= " << target
        << " at delta " << delta << ")\n";
}

void RunOrchestrator::log_stage_shares(RunSession& s, const sdk::Accountant& accountant, double delta,
                                       const std::vector<sdk::PrivacyEvent>& events) const {
  // Where several stages spend, each one's own epsilon (at the same delta), so that a query's or PE's
  // share of the target is visible before anything runs. Composition is tighter than the sum, so the
  // shares add up to more than the total. `events`: what init_from carries, then each stage's plan.
  std::vector<std::size_t> spending;
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    if (components_.mechanisms[i]->is_private()) spending.push_back(i);
  }
  const bool carried = s.carry && !s.init->ledger.entries().empty();
  if (spending.size() + (carried ? 1 : 0) < 2) return;
  s.log << "  each stage alone (at delta " << delta << "; composed they spend less than the sum):";
  for (const std::size_t i : spending) {
    s.log << (i == spending.front() ? " '" : ", '") << recipe_.stages[i].name << "' epsilon "
          << format_epsilon(accountant.epsilon(events.at(i + 1), delta).epsilon);
  }
  if (carried) {
    s.log << ", the initial model (run.init_from) epsilon " << format_epsilon(accountant.epsilon(events.front(), delta).epsilon);
  }
  s.log << "\n";
}

void RunOrchestrator::warn_about_noise(RunSession& s) const {
  // The best case of a private stage: T steps whose clipped mean gradients (norm <= C) all point
  // the same way add up to T C; the noise they carry adds up to a norm of about sigma C sqrt(d T) / B
  // (d trained parameters, expected batch B = q N). Where the ratio, sigma sqrt(d) / (B sqrt(T)),
  // nears 1, even a perfectly consistent signal is lost in the noise: said before training, with
  // the numbers a researcher can change (published: N, the recipe, sigma).
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    const double sigma = noise_multipliers_[i];
    const bool trains = components_.mechanisms[i]->released_examples(s.stage_size(i), 1) == 0;  // not a release
    if (!components_.mechanisms[i]->is_private() || !trains || std::isnan(sigma) || i >= s.stage_trainable.size()) continue;
    const auto kinds = sdk::gaussian_steps(components_.mechanisms[i]->planned_events(s.stage_size(i)));
    if (kinds.size() != 1 || kinds.front().count < 1) continue;
    const double n = static_cast<double>(s.stage_size(i)), batch = kinds.front().sampling_rate * n;
    const double steps = static_cast<double>(kinds.front().count), d = static_cast<double>(s.stage_trainable[i]);
    const double ratio = sigma * std::sqrt(d) / (batch * std::sqrt(steps));
    s.log << "stage '" << recipe_.stages[i].name << "': " << s.stage_size(i) << " private records, expected batch "
          << format_epsilon(batch) << ", " << kinds.front().count << " steps, sigma " << format_epsilon(sigma)
          << ": noise-to-signal " << format_epsilon(ratio) << " at best (sigma sqrt(d) / (B sqrt(T)), d = "
          << s.stage_trainable[i] << " trained parameters)\n";
    if (ratio >= 0.3) {
      s.log << "warning: stage '" << recipe_.stages[i].name << "': the privacy noise is " << format_epsilon(ratio)
            << " times the largest signal its steps can add up to; expect samples that look like noise. More records, "
            << "a larger batch (q N), more steps or fewer trained parameters (e.g. train = \"attention\") lower it; "
            << "see docs/methods/dpdm.md#small-private-datasets\n";
    }
  }
}

void RunOrchestrator::warn_about_delta(RunSession& s, double delta) const {
  // delta is the probability the guarantee fails outright; at 1/N a mechanism that publishes one
  // random record whole is (0, delta)-DP. The usual rule: well below 1/N.
  for (std::size_t i = 0; i < components_.mechanisms.size(); ++i) {
    if (!components_.mechanisms[i]->is_private()) continue;
    const double n = static_cast<double>(s.stage_size(i));
    if (delta * n >= 1) {
      s.log << "warning: privacy.delta " << delta << " is not below 1/N = " << format_epsilon(1 / n) << " (N = "
            << s.stage_size(i) << " private records): a mechanism that publishes one random record whole meets "
            << "(0, 1/N)-DP; choose delta well below 1/N (e.g. " << format_epsilon(std::pow(10.0, std::floor(std::log10(0.1 / n))))
            << "; see docs/accountants.md#choosing-delta)\n";
    }
    return;
  }
}

}  // namespace privdiff::core
