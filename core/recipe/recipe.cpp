#include "recipe/recipe.hpp"

#include <privdiff/config/value.hpp>

#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace {

void write_values(std::ostringstream& out, const sdk::Config& config) {
  for (const auto& [key, value] : config.values()) out << key << " = " << sdk::to_toml(value) << "\n";
}

}  // namespace

const DataSection& Recipe::dataset(const std::string& name) const {
  for (const auto& d : datasets) {
    if (d.name == name) return d;
  }
  throw std::out_of_range("the recipe has no dataset '" + name + "'");
}

Diagnostic Recipe::diagnostic(const std::string& key_path, std::string message) const {
  for (std::string path = key_path; !path.empty();) {
    auto it = locations.find(path);
    if (it != locations.end()) return Diagnostic{it->second.location, key_path, std::move(message), it->second.line,
                                                 it->second.column};
    const auto cut = path.find_last_of(".[");
    path = cut == std::string::npos ? "" : path.substr(0, cut);
  }
  return Diagnostic{file, key_path, std::move(message)};
}

std::string Recipe::to_toml() const {
  std::ostringstream out;
  out << "# Resolved recipe: " << file << ", with every default written out.\n";
  out << "\n[run]\n";
  write_values(out, run);
  out << "\n[privacy]\n";
  write_values(out, privacy);
  for (const auto& d : datasets) {
    out << "\n[" << d.path << "]\ndataset = " << sdk::to_toml(sdk::ConfigValue{d.dataset.id}) << "\n";
    if (d.classes) out << "classes = " << sdk::to_toml(sdk::ConfigValue{*d.classes}) << "\n";
    if (d.near_duplicates != "refuse") out << "near_duplicates = " << sdk::to_toml(sdk::ConfigValue{d.near_duplicates}) << "\n";
    write_values(out, d.dataset.config);
  }
  if (!plugin_search.empty() || !plugin_use.empty()) {
    std::vector<std::string> dirs, libraries;
    for (const auto& p : plugin_search) dirs.push_back(p.string());
    for (const auto& p : plugin_use) libraries.push_back(p.string());
    out << "\n[plugins]\n";
    if (!dirs.empty()) out << "search = " << sdk::to_toml(sdk::ConfigValue{dirs}) << "\n";
    if (!libraries.empty()) out << "use = " << sdk::to_toml(sdk::ConfigValue{libraries}) << "\n";
  }
  if (model) {
    out << "\n[model]\ntype = " << sdk::to_toml(sdk::ConfigValue{model->id}) << "\n";
    write_values(out, model->config);
  }
  if (adapter) {
    out << "\n[adapter]\ntype = " << sdk::to_toml(sdk::ConfigValue{adapter->id}) << "\n";
    write_values(out, adapter->config);
  }
  for (const auto& stage : stages) {
    out << "\n[[stage]]\nname = " << sdk::to_toml(sdk::ConfigValue{stage.name})
        << "\nmechanism = " << sdk::to_toml(sdk::ConfigValue{stage.mechanism.id}) << "\n";
    if (!stage.data.empty()) out << "data = " << sdk::to_toml(sdk::ConfigValue{stage.data}) << "\n";
    write_values(out, stage.mechanism.config);
  }
  if (sampler) {
    out << "\n[sampler]\ntype = " << sdk::to_toml(sdk::ConfigValue{sampler->id}) << "\n";
    write_values(out, sampler->config);
  }
  for (const auto& [id, config] : accountants) {
    out << "\n[accountants." << id << "]\n";
    write_values(out, config);
  }
  for (const auto& entry : evals) {
    out << "\n[[eval]]\n";
    write_values(out, entry.settings);
    for (const auto& evaluator : entry.evaluators) {
      out << "[eval." << evaluator.id << "]\n";
      write_values(out, evaluator.config);
    }
  }
  return out.str();
}

}  // namespace privdiff::core
