#include "run/stage_under_test.hpp"

#include "util/usage_error.hpp"

#include <privdiff/components/mechanism.hpp>

#include <stdexcept>
#include <vector>

namespace privdiff::core {

namespace {

bool is_private_stage(const ComponentRegistry& registry, const StageSection& stage) {
  try {
    return create_component<sdk::Mechanism>(registry, stage.mechanism.id, stage.mechanism.config)->is_private();
  } catch (const UsageError&) {
    throw;
  } catch (const std::runtime_error& e) {  // the mechanism refuses its keys: bad input
    throw UsageError(e.what());
  }
}

// The keys a check sets that the stage's mechanism lacks (empty: it is DP-SGD-style).
std::vector<std::string> missing_keys(const ComponentRegistry& registry, const StageSection& stage) {
  const auto found = registry.find(sdk::ComponentKind::mechanism, stage.mechanism.id);
  if (!found) return {"(unknown mechanism)"};
  std::vector<std::string> missing = sdk::check::keys_missing_for_check(found->registration->schema);
  if (missing.empty() && !stage.mechanism.config.has("max_grad_norm")) missing.push_back("max_grad_norm");
  return missing;
}

bool is_checkable(const ComponentRegistry& registry, const StageSection& stage, bool allow_statistics) {
  return is_private_stage(registry, stage) && (allow_statistics || missing_keys(registry, stage).empty());
}

std::size_t chosen_stage(const Recipe& recipe, const ComponentRegistry& registry, const std::string& stage,
                         const std::string& file, const std::string& verb, bool allow_statistics) {
  const std::string kind = allow_statistics ? "private stage" : "private DP-SGD stage";
  std::vector<std::size_t> found;
  std::string names;
  for (std::size_t i = 0; i < recipe.stages.size(); ++i) {
    names += (names.empty() ? "" : ", ") + recipe.stages[i].name;
    if (stage.empty() ? is_checkable(registry, recipe.stages[i], false) : recipe.stages[i].name == stage) {
      found.push_back(i);
    }
  }
  // Without --stage, a DP-SGD stage first (DP-FETA's and PrivImage's recipes also have a query stage).
  for (std::size_t i = 0; stage.empty() && found.empty() && allow_statistics && i < recipe.stages.size(); ++i) {
    if (is_checkable(registry, recipe.stages[i], true)) found.push_back(i);
  }
  if (found.empty()) {
    throw UsageError(file + ": " + (stage.empty() ? "no " + kind + " to " + verb
                                                  : "no stage named '" + stage + "' (stages: " + names + ")"));
  }
  if (found.size() > 1) {
    throw UsageError(file + ": several " + kind + "s; choose one with --stage (e.g. --stage " +
                     recipe.stages[found.back()].name + ")");
  }
  return found.front();
}

}  // namespace

StageUnderTest stage_under_test(const Recipe& recipe, const ComponentRegistry& registry, const std::string& stage,
                                const std::string& file, const std::string& verb, bool allow_statistics) {
  StageUnderTest out;
  out.index = chosen_stage(recipe, registry, stage, file, verb, allow_statistics);
  const StageSection& section = recipe.stages[out.index];
  out.name = section.name;
  out.mechanism = section.mechanism.id;
  const std::string where = file + ": stage '" + section.name + "' (" + section.mechanism.id + ")";
  if (!is_private_stage(registry, section)) throw UsageError(where + " is not private: there is nothing to " + verb);
  const auto found = registry.find(sdk::ComponentKind::mechanism, section.mechanism.id);
  out.plugin = found->plugin->path.string();
  if (allow_statistics && !sdk::check::keys_missing_for_check(found->registration->schema).empty()) {
    out.releases_statistics = true;
    return out;
  }
  if (const std::vector<std::string> missing = missing_keys(registry, section); !missing.empty()) {
    std::string list;
    for (const auto& key : missing) list += (list.empty() ? "" : ", ") + key;
    throw UsageError(where + " is not a private DP-SGD stage: the checks run mechanisms with DP-SGD's recipe keys, "
                     "and this one has no " + list + " (a mechanism derived from DpSgdMechanism with "
                     "engine::dp_sgd_schema has them)" +
                     (allow_statistics ? std::string() : "; privdiff check-mechanism replays a stage that releases statistics"));
  }
  out.max_grad_norm = section.mechanism.config.get_double("max_grad_norm");
  const std::string id = section.mechanism.id;
  out.make = sdk::check::mechanism_from_config(
      found->registration->schema, section.mechanism.config.path(), section.mechanism.config.values(),
      [&registry, id](const sdk::Config& config) { return create_component<sdk::Mechanism>(registry, id, config); });
  return out;
}

}  // namespace privdiff::core
