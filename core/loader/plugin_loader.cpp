#include "loader/plugin_loader.hpp"

#include <privdiff/plugin/descriptor.hpp>
#include <privdiff/plugin/fingerprint.hpp>

#include <boost/dll/shared_library.hpp>
#include <dlfcn.h>

#include <mutex>
#include <sstream>
#include <vector>

namespace privdiff::core {

namespace {

// Libraries are kept here until exit (and opened with RTLD_NODELETE, so even this vector's
// destruction at exit cannot unmap code that static destructors might still reach).
std::vector<boost::dll::shared_library>& keep_loaded() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}
std::mutex& keep_loaded_mutex() {
  static std::mutex m;
  return m;
}

std::vector<std::pair<std::string, std::string>> split_fingerprint(const std::string& fp) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::istringstream in(fp);
  std::string item;
  while (std::getline(in, item, ';')) {
    auto eq = item.find('=');
    fields.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
  }
  return fields;
}

// Names the fields that differ, e.g. "torch=2.1 (this privdiff: torch=1.13)".
std::string fingerprint_difference(const std::string& plugin_fp, const std::string& host_fp) {
  auto plugin = split_fingerprint(plugin_fp);
  auto host = split_fingerprint(host_fp);
  std::string out;
  for (const auto& [key, value] : host) {
    std::string theirs = "<missing>";
    for (const auto& [k, v] : plugin) {
      if (k == key) theirs = v;
    }
    if (theirs != value) {
      out += (out.empty() ? "" : ", ") + key + "=" + theirs + " (this privdiff: " + key + "=" + value + ")";
    }
  }
  return out.empty() ? "'" + plugin_fp + "' vs '" + host_fp + "'" : out;
}

bool readable_string(const char* s) { return s != nullptr && *s != '\0'; }

}  // namespace

LoadedPlugin load_plugin(const std::filesystem::path& requested) {
  LoadedPlugin plugin;
  std::error_code ec;
  plugin.path = std::filesystem::absolute(requested, ec);
  if (ec) plugin.path = requested;

  auto refuse = [&](std::string reason) {
    plugin.loaded = false;
    plugin.refusal = std::move(reason);
    plugin.components.clear();
    return plugin;
  };

  if (!std::filesystem::is_regular_file(plugin.path, ec)) return refuse("not a file");

  boost::dll::shared_library library;
  try {
    const auto mode = static_cast<boost::dll::load_mode::type>(
        static_cast<unsigned>(boost::dll::load_mode::rtld_now) |
        static_cast<unsigned>(boost::dll::load_mode::rtld_local) | RTLD_NODELETE);
    library.load(plugin.path, mode);
  } catch (const std::exception& e) {
    const char* why = dlerror();
    return refuse(std::string("cannot be loaded: ") + (why ? why : e.what()));
  }

  {
    std::lock_guard<std::mutex> lock(keep_loaded_mutex());
    keep_loaded().push_back(library);
  }

  if (!library.has(sdk::plugin_descriptor_symbol)) {
    return refuse(std::string("no plugin descriptor (symbol '") + sdk::plugin_descriptor_symbol +
                  "' not exported; define one with PRIVDIFF_PLUGIN(...))");
  }
  const auto& descriptor = library.get_alias<const sdk::PluginDescriptor>(sdk::plugin_descriptor_symbol);

  // The first two fields are frozen across ABI versions, so they are safe to read first.
  if (descriptor.abi_version != sdk::plugin_abi_version) {
    return refuse("plugin ABI version " + std::to_string(descriptor.abi_version) + ", this privdiff expects " +
                  std::to_string(sdk::plugin_abi_version) + " (rebuild the plugin against this SDK)");
  }
  if (descriptor.descriptor_size != sizeof(sdk::PluginDescriptor)) {
    return refuse("plugin descriptor is " + std::to_string(descriptor.descriptor_size) +
                  " bytes, this privdiff expects " + std::to_string(sizeof(sdk::PluginDescriptor)) +
                  " (rebuild the plugin against this SDK)");
  }
  if (!readable_string(descriptor.plugin_id) || !readable_string(descriptor.plugin_version) ||
      !descriptor.description || !descriptor.build_fingerprint || !descriptor.register_components) {
    return refuse("plugin descriptor is incomplete (empty id, version, fingerprint or registration function)");
  }
  plugin.plugin_id = descriptor.plugin_id;
  plugin.version = descriptor.plugin_version;
  plugin.description = descriptor.description;

  const std::string host_fingerprint = PRIVDIFF_BUILD_FINGERPRINT;
  if (host_fingerprint != descriptor.build_fingerprint) {
    return refuse("build fingerprint mismatch: " +
                  fingerprint_difference(descriptor.build_fingerprint, host_fingerprint) +
                  " (rebuild the plugin against this SDK)");
  }

  sdk::Registrar registrar;
  try {
    descriptor.register_components(&registrar);
  } catch (const std::exception& e) {
    return refuse(std::string("registration failed: ") + e.what());
  } catch (...) {
    return refuse("registration failed: unknown exception");
  }
  if (registrar.registrations().empty()) return refuse("registration added no components");

  plugin.components = registrar.registrations();
  plugin.loaded = true;
  return plugin;
}

}  // namespace privdiff::core
