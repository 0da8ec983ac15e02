#include "run/provenance.hpp"

#include <privdiff/build_config.hpp>
#include <privdiff/plugin/fingerprint.hpp>

namespace privdiff::core {

nlohmann::json run_provenance(const Recipe& recipe, const ComponentRegistry& registry, const std::string& command_line) {
  nlohmann::json components = nlohmann::json::array();
  auto add = [&](sdk::ComponentKind kind, const std::string& id) {
    nlohmann::json c = {{"kind", sdk::to_string(kind)}, {"id", id}};
    if (const auto found = registry.find(kind, id); found && found->plugin) {
      c["plugin"] = found->plugin->plugin_id;
      c["version"] = found->plugin->version;
      c["library"] = found->plugin->path.string();
    }
    for (const auto& existing : components) {
      if (existing == c) return;
    }
    components.push_back(c);
  };
  if (recipe.model) add(sdk::ComponentKind::model, recipe.model->id);
  if (recipe.adapter) add(sdk::ComponentKind::adapter, recipe.adapter->id);
  for (const auto& stage : recipe.stages) add(sdk::ComponentKind::mechanism, stage.mechanism.id);
  if (recipe.sampler) add(sdk::ComponentKind::sampler, recipe.sampler->id);
  for (const auto& id : recipe.accountant_ids) add(sdk::ComponentKind::accountant, id);
  return {{"privdiff", PRIVDIFF_SDK_VERSION},
          {"build", PRIVDIFF_BUILD_FINGERPRINT},
          {"command", command_line},
          {"components", components}};
}

}  // namespace privdiff::core
