#include "loader/component_registry.hpp"

#include "loader/plugin_loader.hpp"

#include <algorithm>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

const LoadedPlugin& ComponentRegistry::add_library(const fs::path& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) canonical = path;
  for (const auto& p : plugins_) {
    if (p->path == canonical) return *p;
  }

  return add_checked(std::make_unique<LoadedPlugin>(load_plugin(canonical)));
}

const LoadedPlugin& ComponentRegistry::add_builtin(const std::string& name,
                                                   std::vector<sdk::ComponentRegistration> components) {
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->path = name;
  plugin->loaded = true;
  plugin->plugin_id = name;
  plugin->components = std::move(components);
  return add_checked(std::move(plugin));
}

const LoadedPlugin& ComponentRegistry::add_checked(std::unique_ptr<LoadedPlugin> plugin) {
  if (plugin->loaded) {
    for (const auto& reg : plugin->components) {
      if (auto existing = find(reg.kind, reg.id)) {
        plugin->loaded = false;
        plugin->refusal = "duplicate component id: " + sdk::to_string(reg.kind) + " '" + reg.id +
                          "' is already provided by " + existing->plugin->path.string();
        plugin->components.clear();
        break;
      }
    }
  }
  plugins_.push_back(std::move(plugin));
  return *plugins_.back();
}

void ComponentRegistry::add_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && name.rfind("lib", 0) == 0 && entry.path().extension() == ".so") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) add_library(f);
}

std::optional<RegisteredComponent> ComponentRegistry::find(sdk::ComponentKind kind, const std::string& id) const {
  for (const auto& p : plugins_) {
    if (!p->loaded) continue;
    for (const auto& reg : p->components) {
      if (reg.kind == kind && reg.id == id) return RegisteredComponent{&reg, p.get()};
    }
  }
  return std::nullopt;
}

std::vector<std::string> ComponentRegistry::ids(sdk::ComponentKind kind) const {
  std::vector<std::string> out;
  for (const auto& p : plugins_) {
    if (!p->loaded) continue;
    for (const auto& reg : p->components) {
      if (reg.kind == kind) out.push_back(reg.id);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ComponentRegistry::refused_hint(const std::string& id) const {
  std::vector<const LoadedPlugin*> refused;
  for (const auto& p : plugins_) {
    if (p->loaded) continue;
    if (p->plugin_id == id || p->path.stem().string() == "lib" + id) {
      return "plugin " + p->path.string() + " would provide it but was refused: " + p->refusal;
    }
    refused.push_back(p.get());
  }
  if (refused.empty()) return "";
  std::string out = "refused plugins that might provide it: ";
  for (std::size_t i = 0; i < refused.size(); ++i) {
    out += (i ? "; " : "") + refused[i]->path.string() + ": " + refused[i]->refusal;
  }
  return out;
}

std::unique_ptr<sdk::Component> ComponentRegistry::create(sdk::ComponentKind kind, const std::string& id,
                                                          const sdk::Config& config) const {
  auto found = find(kind, id);
  const std::string what = sdk::to_string(kind) + " '" + id + "'";
  if (!found) {
    std::string hint = refused_hint(id);
    throw std::runtime_error("no " + what + " is loaded" + (hint.empty() ? "" : "; " + hint));
  }
  const std::string context = "while constructing " + what + " from " + found->plugin->path.string() + ": ";
  try {
    auto component = found->registration->factory(config);
    if (!component) throw std::runtime_error("its factory returned nothing");
    return component;
  } catch (const std::exception& e) {
    throw std::runtime_error(context + e.what());
  } catch (...) {
    throw std::runtime_error(context + "unknown exception");
  }
}

}  // namespace privdiff::core
