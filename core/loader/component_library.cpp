#include "loader/component_library.hpp"

#include <privdiff/io/json_error.hpp>

#include <algorithm>
#include <stdexcept>

namespace privdiff::core {

std::vector<ComponentLibrary> component_libraries(const ComponentRegistry& registry,
                                                  const std::vector<std::pair<sdk::ComponentKind, std::string>>& used) {
  std::vector<ComponentLibrary> out;
  for (const auto& [kind, id] : used) {
    const std::string kind_name = sdk::to_string(kind);
    const bool repeated = std::any_of(out.begin(), out.end(), [&](const auto& c) { return c.kind == kind_name && c.id == id; });
    if (repeated) continue;
    const auto found = registry.find(kind, id);
    if (!found || !found->plugin) continue;
    out.push_back({kind_name, id, found->plugin->path.string(), registry.library_sha256(*found->plugin)});
  }
  return out;
}

nlohmann::json to_json(const std::vector<ComponentLibrary>& libraries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : libraries) {
    out.push_back({{"kind", c.kind}, {"id", c.id}, {"library", c.library}, {"sha256", c.sha256}});
  }
  return out;
}

std::vector<ComponentLibrary> component_libraries_from_json(const nlohmann::json& j) {
  std::vector<ComponentLibrary> out;
  try {
    for (const auto& c : j) {
      out.push_back({c.at("kind").get<std::string>(), c.at("id").get<std::string>(), c.at("library").get<std::string>(),
                     c.at("sha256").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not a list of component libraries (") + privdiff::sdk::json_error_text(e) + ")");
  }
  if (!j.is_array()) throw std::runtime_error("not a list of component libraries");
  return out;
}

namespace {

std::string describe(const ComponentLibrary& c) {
  return c.library + (c.sha256.empty() ? " (built into the host)" : " (sha256 " + c.sha256 + ")");
}

bool same_code(const ComponentLibrary& a, const ComponentLibrary& b) {
  return a.sha256.empty() && b.sha256.empty() ? a.library == b.library : a.sha256 == b.sha256;
}

}  // namespace

std::string library_difference(const std::vector<ComponentLibrary>& recorded, const std::vector<ComponentLibrary>& now) {
  for (const auto& was : recorded) {
    const auto is = std::find_if(now.begin(), now.end(), [&](const auto& c) { return c.kind == was.kind && c.id == was.id; });
    const std::string what = was.kind + " '" + was.id + "'";
    if (is == now.end()) return what + " ran from " + describe(was) + " and is not loaded now";
    if (!same_code(was, *is)) return what + " ran from " + describe(was) + " and would now run from " + describe(*is);
  }
  for (const auto& is : now) {
    const bool known = std::any_of(recorded.begin(), recorded.end(), [&](const auto& c) { return c.kind == is.kind && c.id == is.id; });
    if (!known) return is.kind + " '" + is.id + "' is not in the record and would now run from " + describe(is);
  }
  return "";
}

}  // namespace privdiff::core
