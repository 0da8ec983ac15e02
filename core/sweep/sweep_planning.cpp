#include "sweep/sweep_planning.hpp"

#include "run/recipe_loading.hpp"
#include "run/provenance.hpp"
#include "data/open_dataset.hpp"
#include "run/run_orchestrator.hpp"
#include "recipe/suggest.hpp"
#include "selection/sweep_space.hpp"

#include <privdiff/components/evaluator.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

namespace privdiff::core {

namespace {

using sdk::selection::CandidateCount;
const auto conversion = sweep_conversion;
const auto delta_hat_source = sweep_delta_hat_source;

// A recipe's spending as a function of its "auto" stage's noise multiplier (and the stage's index).
struct Spending {
  ComponentRegistry registry;
  std::unique_ptr<RunOrchestrator> orchestrator;
  std::function<sdk::PrivacyEvent(double)> events;
  std::size_t stage = 0;
  double epsilon_target = 0, delta = 0;
  std::vector<std::string> evaluators;  ///< of the recipe's [[eval]] entries
  std::vector<ComponentSection> evaluator_sections;  ///< their configurations (for the score's metric names)
  std::vector<ComponentLibrary> libraries;  ///< the code that computed the spending (recipe_component_libraries)
};

// `warnings` (may be null) gets the pre-flight's warnings (delta not below 1/N, ...).
std::unique_ptr<Spending> spending_of(const SweepState& s, const std::vector<std::string>& overrides,
                                      const std::vector<std::string>& plugin_paths, std::ostream* warnings = nullptr) {
  auto out = std::make_unique<Spending>();
  const Recipe recipe = load_recipe(s.recipe.string(), overrides, plugin_paths, out->registry);
  if (!recipe.privacy.has("epsilon") || !recipe.privacy.has("delta")) {
    throw UsageError("sweep: " + s.recipe.string() + " needs [privacy] epsilon (the sweep's target) and delta");
  }
  out->epsilon_target = recipe.privacy.get_double("epsilon");
  out->delta = recipe.privacy.get_double("delta");
  for (const auto& entry : recipe.evals) {
    // A score of the private training data would be a noise-free statistic of it: not covered.
    if (entry.settings.get_string("reference") != "held_out") {
      throw UsageError("sweep: [[eval]] reference = \"" + entry.settings.get_string("reference") + "\" scores against "
                       "the private training data; a sweep selects by scores on held-out data only (reference = "
                       "\"held_out\")");
    }
    for (const auto& id : entry.settings.get_string_list("evaluators")) out->evaluators.push_back(id);
    for (const auto& evaluator : entry.evaluators) {
      out->evaluator_sections.push_back(evaluator);
      // An evaluator option that fits the score to the training split (the release gate refuses any
      // other way a candidate's score reads it, but only after the candidates have spent).
      if (evaluator.config.has("selection") && evaluator.config.get_string("selection") == "real") {
        throw UsageError("sweep: [eval." + evaluator.id + "] selection = \"real\" selects on the private training "
                         "data: a score fitted to it would make the choice among candidates a noise-free function of "
                         "private records, which no selection theorem covers; use selection = \"synthetic\"");
      }
    }
  }
  out->libraries = recipe_component_libraries(recipe, out->registry);
  ComposedRun components = compose_for_command(recipe, out->registry, s.recipe.string());
  for (std::size_t i = 0; i < components.mechanisms.size(); ++i) {
    if (components.mechanisms[i]->needs_calibration()) out->stage = i;
  }
  auto& registry = out->registry;
  out->orchestrator = std::make_unique<RunOrchestrator>(
      recipe, std::move(components), [&registry](const DataSection& data) { return open_dataset(data, registry); });
  std::ostringstream quiet;  // the pre-flight's own log: the sweep says what matters, and passes on its warnings
  try {
    out->events = out->orchestrator->planned_spending(quiet);
  } catch (const std::exception& e) {
    throw UsageError("sweep: " + std::string(e.what()));
  }
  std::istringstream lines(quiet.str());
  for (std::string line; warnings && std::getline(lines, line);) {
    if (line.rfind("warning:", 0) == 0) *warnings << line << "\n";
  }
  return out;
}

// The smallest noise multiplier of the reference candidate whose best budget meets the target.
sdk::selection::BestBudget reference_budget(const CandidateCount& count, const Spending& reference) {
  const auto& orders = sdk::rdp::default_orders();
  auto best_at = [&](double sigma) {
    return sdk::selection::best_budget(count, sdk::selection::candidate_curve(reference.events(sigma), orders, delta_hat_source),
                                       reference.delta, conversion);
  };
  double low = 0, high = 1;
  while (best_at(high).epsilon > reference.epsilon_target) {
    low = high, high *= 2;
    if (high > 1e4) throw UsageError("sweep: no noise multiplier up to 1e4 meets the target epsilon for the selection");
  }
  while (high - low > 1e-4 * high) {
    const double mid = 0.5 * (low + high);
    (best_at(mid).epsilon <= reference.epsilon_target ? high : low) = mid;
  }
  return best_at(high);
}

std::vector<std::string> with_values(std::vector<std::string> overrides, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) overrides.push_back(key + "=" + value);
  return overrides;
}

// Every value the search can draw is one the recipe takes, checked before K is drawn and anything spends:
// each listed value, and a log-range's ends. The target and the calibrated noise are the sweep's, never a
// candidate's hyperparameter.
void check_search_space(const SweepState& s, const std::vector<SweepParameter>& space, const std::string& noise_key,
                        const std::vector<std::string>& plugin_paths) {
  for (const auto& p : space) {
    if (p.key.rfind("privacy.", 0) == 0 || p.key == noise_key) {
      throw UsageError("sweep --param " + p.key + ": " + (p.key == noise_key ? "the sweep calibrates this stage's noise "
                       "multiplier itself" : "the privacy target is the whole search's, not a candidate's") +
                       "; it cannot be searched");
    }
    std::vector<std::string> values = p.values;
    if (values.empty()) {
      for (double end : {p.low, p.high}) {
        std::ostringstream text;
        text.precision(17);
        if (p.integer) text << std::llround(end); else text << end;
        values.push_back(text.str());
      }
    }
    for (const auto& value : values) {
      ComponentRegistry registry;
      try {
        load_recipe(s.recipe.string(), with_values(s.overrides, {{p.key, value}}), plugin_paths, registry);
      } catch (const std::exception& e) {
        const std::string why = e.what();
        throw UsageError("sweep --param " + p.key + ": the value " + value + " is refused before any candidate runs: " +
                         why.substr(0, why.find('\n')));
      }
    }
  }
}

}  // namespace

namespace {

std::vector<SweepParameter> parsed_space(const SweepState& state) {
  std::vector<SweepParameter> space;
  for (const auto& spec : state.space) {
    try {
      space.push_back(parse_sweep_parameter(spec));
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("sweep --param: ") + e.what());
    }
  }
  return space;
}

// The score's metric is one its evaluator reports with the recipe's settings, where the evaluator says
// (a misspelt metric would otherwise be found out after the first candidate has trained and spent). Only
// the score's evaluator is made, once (the Inception one loads its weights).
void check_score_metric(const std::string& score, const Spending& reference) {
  std::vector<std::string> reported;  // by every [[eval]] entry of the score's evaluator
  std::string id;
  for (const auto& section : reference.evaluator_sections) {
    if (score.rfind(section.id + ".", 0) != 0) continue;
    std::vector<std::string> names;
    try {
      names = create_component<sdk::Evaluator>(reference.registry, section.id, section.config)->metric_names();
    } catch (const std::exception&) {  // not made here: the candidate's own run refuses it
    }
    if (names.empty()) return;  // known only from the data: not checked
    for (const auto& name : names) reported.push_back(section.id + "." + name);
    id = section.id;
  }
  if (reported.empty() || std::find(reported.begin(), reported.end(), score) != reported.end()) return;
  throw UsageError("sweep --score " + score + ": " + id + " reports " + join(reported) +
                   " with the recipe's [[eval]] settings" + did_you_mean(score, reported));
}

}  // namespace

void plan_budget(SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log) {
  const std::vector<SweepParameter> space = parsed_space(state);
  const auto reference = spending_of(state, state.overrides, plugin_paths, &log);
  // The score is fixed before any candidate runs (choosing it after seeing the results would be a
  // selection the theorem does not cover): it must name a metric of one of the recipe's evaluators.
  bool known = false;
  for (const auto& id : reference->evaluators) known = known || state.score.rfind(id + ".", 0) == 0;
  if (!known) {
    std::string ids;
    for (const auto& id : reference->evaluators) ids += (ids.empty() ? "" : ", ") + id;
    throw UsageError("sweep --score " + state.score + ": name it EVALUATOR.METRIC, the evaluator one of the recipe's "
                     "[[eval]] evaluators (" + (ids.empty() ? std::string("it has no [[eval]]") : ids) +
                     "), e.g. dpdm_classifiers.accuracy.cnn");
  }
  check_score_metric(state.score, *reference);
  state.libraries = reference->libraries;  // the code the budget and every candidate's noise are calibrated with
  state.target_epsilon = reference->epsilon_target;
  state.delta = reference->delta;
  state.noise_key = "stage." + std::to_string(reference->stage) + ".noise_multiplier";
  check_search_space(state, space, state.noise_key, plugin_paths);
  const auto best = reference_budget(state.count, *reference);
  state.budget = best.budget;
  state.epsilon = best.epsilon;
  log << "sweep: " << describe_count(state.count) << ", target epsilon " << state.target_epsilon << " at delta "
      << state.delta << ": each candidate within RDP " << state.budget.rdp << " at order " << state.budget.order
      << " (the recipe as given: noise multiplier within it)\n";
}

void plan_sweep(SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log) {
  plan_budget(state, plugin_paths, log);
  const std::vector<SweepParameter> space = parsed_space(state);
  // Unseeded (the default), K and the draws come from the OS's secure randomness, K from bits of its own:
  // the selected candidate's released hyperparameters then say nothing about K. Neither is kept but in
  // the (private) state.
  std::uint64_t seed = state.seed.value_or(0), k_bits = 0;
  if (!state.seed) {
    sdk::engine::os_random_bytes(&seed, sizeof seed);
    sdk::engine::os_random_bytes(&k_bits, sizeof k_bits);
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double u = state.seed ? unit(rng) : static_cast<double>(k_bits >> 11) * 0x1.0p-53;  // [0, 1)
  const std::int64_t k = sdk::selection::count_for_uniform(state.count, u);
  const auto& orders = sdk::rdp::default_orders();
  for (std::int64_t i = 0; i < k; ++i) {
    SweepCandidate c;
    for (const auto& p : space) c.values[p.key] = draw_sweep_value(p, rng);
    const auto spending = spending_of(state, with_values(state.overrides, c.values), plugin_paths);
    c.noise_multiplier = sdk::selection::calibrate_candidate(state.count, state.budget, spending->events, orders, conversion,
                                                             delta_hat_source);
    c.single_run_epsilon = sdk::rdp::epsilon(orders, sdk::rdp::event_rdp(spending->events(c.noise_multiplier), orders),
                                             state.delta, conversion).epsilon;
    state.candidates.push_back(std::move(c));
  }
}

void check_code_unchanged(const SweepState& state, const std::vector<std::string>& plugin_paths, std::ostream& log) {
  if (state.libraries.empty()) {
    log << "warning: the sweep was planned by an older privdiff that did not record its components' libraries: "
           "the remaining candidates cannot be checked to run the code it was planned with\n";
    return;
  }
  ComponentRegistry registry;
  const Recipe recipe = load_recipe(state.recipe.string(), state.overrides, plugin_paths, registry);
  const std::string difference = library_difference(state.libraries, recipe_component_libraries(recipe, registry));
  if (difference.empty()) return;
  throw UsageError("sweep --resume: " + difference + "; the sweep's budget and its candidates' noise were calibrated "
                   "with the code it was planned with (restore that library, or start a new sweep: what the finished "
                   "candidates spent stays spent; keep this directory private)");
}

}  // namespace privdiff::core
