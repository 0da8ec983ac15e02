#include "loader/component_registry.hpp"

#include "loader/plugin_loader.hpp"

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/io/content_hash.hpp>

#include <algorithm>
#include <fstream>
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

const LoadedPlugin& ComponentRegistry::choose_library(const fs::path& path) {
  const LoadedPlugin& plugin = add_library(path);
  if (!chosen(plugin)) chosen_.push_back(plugin.path);
  return plugin;
}

const LoadedPlugin& ComponentRegistry::add_builtin(const std::string& name,
                                                   std::vector<sdk::ComponentRegistration> components) {
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->path = name;
  plugin->loaded = true;
  plugin->built_in = true;
  plugin->plugin_id = name;
  plugin->components = std::move(components);
  return add_checked(std::move(plugin));
}

// A library sharing ids with another is kept loaded: which one an id means is decided when it is
// looked up (find), once every library and the recipe's choice are known.
const LoadedPlugin& ComponentRegistry::add_checked(std::unique_ptr<LoadedPlugin> plugin) {
  plugins_.push_back(std::move(plugin));
  return *plugins_.back();
}

bool ComponentRegistry::chosen(const LoadedPlugin& plugin) const {
  return !plugin.built_in && std::find(chosen_.begin(), chosen_.end(), plugin.path) != chosen_.end();
}

std::string ComponentRegistry::library_sha256(const LoadedPlugin& plugin) const {
  if (plugin.built_in) return "";
  auto cached = sha256_.find(plugin.path);
  if (cached != sha256_.end()) return cached->second;
  std::ifstream in(plugin.path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read plugin library " + plugin.path.string());
  sdk::Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    hash.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw std::runtime_error("cannot read plugin library " + plugin.path.string());
  return sha256_[plugin.path] = hash.hex_digest();
}

std::vector<RegisteredComponent> ComponentRegistry::providers(sdk::ComponentKind kind, const std::string& id) const {
  std::vector<RegisteredComponent> out;
  for (const auto& p : plugins_) {
    if (!p->loaded) continue;
    for (const auto& reg : p->components) {
      if (reg.kind == kind && reg.id == id) {
        out.push_back(RegisteredComponent{&reg, p.get()});
        break;  // one registration per library and id
      }
    }
  }
  return out;
}

std::optional<RegisteredComponent> ComponentRegistry::resolve(const std::vector<RegisteredComponent>& providers,
                                                             std::string* why) const {
  std::vector<RegisteredComponent> chosen_ones;
  for (const auto& p : providers) {
    if (chosen(*p.plugin)) chosen_ones.push_back(p);
  }
  if (chosen_ones.size() == 1) {
    if (why) *why = "chosen";
    return chosen_ones.front();
  }
  if (!chosen_ones.empty()) return std::nullopt;  // two chosen libraries: the recipe names both
  // Copies of one library (the same bytes at two paths) are the same code: the first found is used.
  try {
    const std::string first = library_sha256(*providers.front().plugin);
    for (const auto& p : providers) {
      if (first.empty() || library_sha256(*p.plugin) != first) return std::nullopt;
    }
  } catch (const std::runtime_error&) {
    return std::nullopt;  // a library that cannot be read cannot be shown to be a copy
  }
  if (why) *why = "same";
  return providers.front();
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
  const std::vector<RegisteredComponent> all = providers(kind, id);
  if (all.empty()) return std::nullopt;
  if (all.size() == 1) return all.front();
  return resolve(all, nullptr);
}

std::vector<std::string> ComponentRegistry::ids(sdk::ComponentKind kind) const {
  std::vector<std::string> out;
  for (const auto& p : plugins_) {
    if (!p->loaded) continue;
    for (const auto& reg : p->components) {
      if (reg.kind == kind && std::find(out.begin(), out.end(), reg.id) == out.end() && find(kind, reg.id)) {
        out.push_back(reg.id);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

std::string libraries_of(const std::vector<RegisteredComponent>& providers) {
  std::string out;
  for (std::size_t i = 0; i < providers.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == providers.size() ? " and " : ", ") + providers[i].plugin->path.string();
  }
  return out;
}

}  // namespace

std::string ComponentRegistry::ambiguity(sdk::ComponentKind kind, const std::string& id) const {
  const std::vector<RegisteredComponent> all = providers(kind, id);
  if (all.size() < 2 || resolve(all, nullptr)) return "";
  return sdk::to_string(kind) + " '" + id + "' is provided by " + std::to_string(all.size()) + " libraries, " +
         libraries_of(all) + ": name the one to use in the recipe's [plugins] use = [\"PATH/TO/LIBRARY.so\"] "
         "(docs/writing-a-plugin.md#two-libraries-with-one-id), or remove the other from the plugin path";
}

std::vector<std::string> ComponentRegistry::duplicate_notices() const {
  std::vector<std::string> out;
  std::vector<std::pair<sdk::ComponentKind, std::string>> seen;
  for (const auto& p : plugins_) {
    if (!p->loaded) continue;
    for (const auto& reg : p->components) {
      const std::pair<sdk::ComponentKind, std::string> key{reg.kind, reg.id};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      const std::vector<RegisteredComponent> all = providers(reg.kind, reg.id);
      if (all.size() < 2) continue;
      const std::string what = sdk::to_string(reg.kind) + " '" + reg.id + "'";
      std::string why;
      const auto used = resolve(all, &why);
      if (!used) {
        out.push_back("warning: " + ambiguity(reg.kind, reg.id));
        continue;
      }
      for (const auto& other : all) {
        if (other.plugin == used->plugin) continue;
        out.push_back("plugins: " + what + " of " + other.plugin->path.string() + " is not used: " +
                      (why == "chosen" ? "the recipe's [plugins] use names " + used->plugin->path.string()
                                       : used->plugin->path.string() + " (the same bytes) was found first"));
      }
    }
  }
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
    if (std::string why = ambiguity(kind, id); !why.empty()) throw std::runtime_error(why);
    std::string hint = refused_hint(id);
    throw std::runtime_error("no " + what + " is loaded" + (hint.empty() ? "" : "; " + hint));
  }
  const std::string context = "while constructing " + what + " from " + found->plugin->path.string() + ": ";
  try {
    auto component = found->registration->factory(config);
    if (!component) throw std::runtime_error("its factory returned nothing");
    return component;
  } catch (const sdk::KeyValueError&) {  // bad input at a key: the caller places it in the recipe
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(context + e.what());
  } catch (...) {
    throw std::runtime_error(context + "unknown exception");
  }
}

}  // namespace privdiff::core
