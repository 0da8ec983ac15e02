// privdiff plugins list | plugins show ID
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "cli/recipe_reference.hpp"
#include "recipe/suggest.hpp"

#include <privdiff/config/value.hpp>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

using sdk::ComponentKind;

void list_plugins(const ComponentRegistry& registry) {
  for (ComponentKind kind : sdk::all_component_kinds) {
    std::cout << sdk::plural(kind) << ":\n";
    bool any = false;
    for (const auto& plugin : registry.plugins()) {
      if (!plugin->loaded) continue;
      for (const auto& c : plugin->components) {
        if (c.kind != kind) continue;
        any = true;
        std::cout << "  " << std::left << std::setw(20) << c.id << " " << std::setw(8) << plugin->version << " "
                  << c.description << "\n"
                  << "  " << std::setw(20) << "" << " " << plugin->path.string() << "\n";
      }
    }
    if (!any) std::cout << "  (none)\n";
  }
  bool header = false;
  for (const auto& plugin : registry.plugins()) {
    if (plugin->loaded) continue;
    if (!header) std::cout << "refused plugins:\n";
    header = true;
    std::cout << "  " << plugin->path.string() << "\n    refused: " << plugin->refusal << "\n";
  }
  if (registry.plugins().empty()) {
    std::cout << "no plugins found; searched --plugin-path, $PRIVDIFF_PLUGIN_PATH and the directory next to "
                 "privdiff (lib/privdiff/plugins)\n";
  }
}

void show_component(const sdk::ComponentRegistration& c, const LoadedPlugin& plugin) {
  std::cout << c.id << " (" << sdk::to_string(c.kind) << ") " << c.description << "\n"
            << "  plugin:  " << plugin.plugin_id << " " << plugin.version << ", " << plugin.path.string() << "\n"
            << "  recipe:  " << recipe_placement(c.kind, c.id) << "\n";
  if (c.schema.keys().empty()) {
    std::cout << "  keys:    (none)\n";
    return;
  }
  std::cout << "  keys:\n";
  for (const auto& key : c.schema.keys()) {
    std::string value = key.default_value() ? "= " + sdk::to_toml(*key.default_value())
                                            : (key.is_required() ? "(required)" : "(optional)");
    std::cout << "    " << key.name() << " " << value << "\n"
              << "        " << key.expectation() << (key.doc_text().empty() ? "" : ". " + key.doc_text()) << "\n";
  }
}

}  // namespace

CLI::App* add_plugins_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* plugins = app.add_subcommand("plugins", "List the installed plugins, show a component's recipe keys, or print the recipe reference");
  plugins->require_subcommand(1);

  CLI::App* list = plugins->add_subcommand("list", "List loaded components by kind, and refused plugins with why");
  list->callback([&global, &exit_code] {
    ComponentRegistry registry;
    load_plugins(registry, global, nullptr);
    list_plugins(registry);
    exit_code = exit_ok;
  });

  CLI::App* show = plugins->add_subcommand("show", "Show a component's keys with types, defaults and docs");
  auto id = std::make_shared<std::string>();
  show->add_option("ID", *id, "component id, e.g. dpdm")->required();
  show->callback([&global, &exit_code, id] {
    ComponentRegistry registry;
    load_plugins(registry, global, nullptr);
    bool found = false;
    for (ComponentKind kind : sdk::all_component_kinds) {
      if (auto c = registry.find(kind, *id)) {
        if (found) std::cout << "\n";
        show_component(*c->registration, *c->plugin);
        found = true;
      }
    }
    for (ComponentKind kind : sdk::all_component_kinds) {
      if (std::string why = registry.ambiguity(kind, *id); !found && !why.empty()) throw UsageError(why);
    }
    if (!found) {
      std::vector<std::string> all;
      for (ComponentKind kind : sdk::all_component_kinds) {
        for (auto& i : registry.ids(kind)) all.push_back(i);
      }
      std::string hint = registry.refused_hint(*id);
      throw UsageError("no component '" + *id + "'" + did_you_mean(*id, all) + "; installed: " + join(all) +
                       (hint.empty() ? "" : "; " + hint));
    }
    exit_code = exit_ok;
  });
  CLI::App* reference = plugins->add_subcommand(
      "reference", "Print every recipe key of the host's sections and of every installed component, as Markdown; "
                   "--out docs writes the guide's recipe-reference.md and reference/*.md");
  auto out_dir = std::make_shared<std::string>();
  reference->add_option("--out", *out_dir, "write the pages under DIR (e.g. docs) instead of printing them");
  reference->callback([&global, &exit_code, out_dir] {
    ComponentRegistry registry;
    load_plugins(registry, global, nullptr);
    for (const ReferencePage& page : recipe_reference(registry)) {
      if (out_dir->empty()) {
        std::cout << page.text;
        continue;
      }
      const fs::path file = fs::path(*out_dir) / page.path;
      fs::create_directories(file.parent_path());
      std::ofstream stream(file, std::ios::binary);
      stream << page.text;
      if (!stream.flush()) throw std::runtime_error("cannot write " + file.string());
    }
    exit_code = exit_ok;
  });
  return plugins;
}

}  // namespace privdiff::core::cli
