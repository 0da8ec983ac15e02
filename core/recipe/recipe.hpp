#pragma once
// A validated recipe: every section converted to a typed Config with defaults filled in.
// Components are referred to by id; nothing is constructed yet.

#include <privdiff/config/config.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

struct ComponentSection {
  std::string id;      ///< component id, e.g. "pixel_unet"
  sdk::Config config;  ///< the section's keys other than the selector ("type" / "mechanism")
};

struct StageSection {
  std::string name;
  ComponentSection mechanism;
};

struct Recipe {
  std::string file;
  sdk::Config run;      ///< [run]
  sdk::Config privacy;  ///< [privacy]
  sdk::Config data;     ///< [data]
  std::vector<std::filesystem::path> plugin_search;  ///< [plugins] search, absolute
  std::optional<ComponentSection> model;
  std::vector<StageSection> stages;
  std::optional<ComponentSection> sampler;
  /// [accountants.<id>] option tables, for every accountant the recipe uses.
  std::map<std::string, sdk::Config> accountants;
  /// [[eval]] entries: evaluations run after training (see eval_schema()).
  std::vector<sdk::Config> evals;
  /// Accountants the recipe names ([privacy] accountant first, then report), without repeats.
  std::vector<std::string> accountant_ids;

  /// The recipe with every default written out, as TOML: what actually ran.
  std::string to_toml() const;
};

}  // namespace privdiff::core
