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

/// A dataset: the single [data] section (name "data") or one [data.NAME] table.
struct DataSection {
  std::string name;   ///< what stages refer to it by ("data" for the single form)
  std::string path;   ///< "data" or "data.NAME", for messages
  ComponentSection dataset;  ///< the dataset plugin (`dataset` key; "idx" when only `path` is given)
  std::optional<std::vector<std::int64_t>> classes;  ///< keep only these labels (host key)
};

struct StageSection {
  std::string name;
  ComponentSection mechanism;
  std::string data;  ///< the DataSection it trains on (empty when the recipe has none)
};

/// An [[eval]] entry: the host's keys (eval_schema(): samples, reference, evaluators, ...) and the
/// evaluators it runs, each with the options of its [eval.ID] table.
struct EvalSection {
  sdk::Config settings;
  std::vector<ComponentSection> evaluators;
};

struct Recipe {
  std::string file;
  sdk::Config run;      ///< [run]
  sdk::Config privacy;  ///< [privacy]
  std::vector<DataSection> datasets;  ///< [data] or [data.NAME] sections, in file order
  std::vector<std::filesystem::path> plugin_search;  ///< [plugins] search, absolute
  std::optional<ComponentSection> model;
  std::optional<ComponentSection> adapter;  ///< [adapter]: grafted onto the model when it is built
  std::vector<StageSection> stages;
  std::optional<ComponentSection> sampler;
  /// [accountants.<id>] option tables, for every accountant the recipe uses.
  std::map<std::string, sdk::Config> accountants;
  /// [[eval]] entries: evaluations run after training.
  std::vector<EvalSection> evals;
  /// Accountants the recipe names ([privacy] accountant first, then report), without repeats.
  std::vector<std::string> accountant_ids;

  /// The dataset named `name`; throws std::out_of_range when there is none.
  const DataSection& dataset(const std::string& name) const;

  /// The recipe with every default written out, as TOML: what actually ran.
  std::string to_toml() const;
};

}  // namespace privdiff::core
