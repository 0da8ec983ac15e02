#include "run/provenance.hpp"

#include <privdiff/build_config.hpp>
#include <privdiff/plugin/fingerprint.hpp>

#include <algorithm>

namespace privdiff::core {

std::vector<std::pair<sdk::ComponentKind, std::string>> recipe_components(const Recipe& recipe) {
  using sdk::ComponentKind;
  std::vector<std::pair<ComponentKind, std::string>> out;
  auto add = [&out](ComponentKind kind, const std::string& id) {
    if (std::find(out.begin(), out.end(), std::make_pair(kind, id)) == out.end()) out.emplace_back(kind, id);
  };
  if (recipe.model) add(ComponentKind::model, recipe.model->id);
  if (recipe.adapter) add(ComponentKind::adapter, recipe.adapter->id);
  for (const auto& stage : recipe.stages) add(ComponentKind::mechanism, stage.mechanism.id);
  if (recipe.sampler) add(ComponentKind::sampler, recipe.sampler->id);
  for (const auto& id : recipe.accountant_ids) add(ComponentKind::accountant, id);
  for (const auto& data : recipe.datasets) add(ComponentKind::dataset, data.dataset.id);
  for (const auto& entry : recipe.evals) {
    for (const auto& evaluator : entry.evaluators) add(ComponentKind::evaluator, evaluator.id);
  }
  return out;
}

std::vector<ComponentLibrary> recipe_component_libraries(const Recipe& recipe, const ComponentRegistry& registry) {
  return component_libraries(registry, recipe_components(recipe));
}

nlohmann::json run_provenance(const Recipe& recipe, const ComponentRegistry& registry, const std::string& command_line) {
  nlohmann::json components = nlohmann::json::array();
  for (const auto& [kind, id] : recipe_components(recipe)) {
    nlohmann::json c = {{"kind", sdk::to_string(kind)}, {"id", id}};
    if (const auto found = registry.find(kind, id); found && found->plugin) {
      c["plugin"] = found->plugin->plugin_id;
      c["version"] = found->plugin->version;
      c["library"] = found->plugin->path.string();
      c["sha256"] = registry.library_sha256(*found->plugin);
    }
    components.push_back(c);
  }
  return {{"privdiff", PRIVDIFF_SDK_VERSION},
          {"build", PRIVDIFF_BUILD_FINGERPRINT},
          {"command", command_line},
          {"components", components}};
}

}  // namespace privdiff::core
