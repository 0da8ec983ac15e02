#pragma once
// A validated recipe: every section converted to a typed Config with defaults filled in.
// Components are referred to by id; nothing is constructed yet.

#include "recipe/diagnostic.hpp"

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
  /// near_duplicates = "caveat" (host key): public data holding near-duplicates of private records are
  /// the user's statement of independent pictures, and the run carries a caveat; "refuse" (default): refused.
  std::string near_duplicates = "refuse";
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

/// [sweep]: privdiff sweep's search; privdiff run ignores it.
struct SweepSection {
  sdk::Config options;              ///< sweep_schema(): score, minimize, candidates, ...
  std::vector<std::string> params;  ///< [sweep.params] as --param specs, "KEY=V1,V2" or "KEY=log:LOW:HIGH[:int]"
};

struct Recipe {
  std::string file;
  sdk::Config run;      ///< [run]
  sdk::Config privacy;  ///< [privacy]
  std::vector<DataSection> datasets;  ///< [data] or [data.NAME] sections, in file order
  std::vector<std::filesystem::path> plugin_search;  ///< [plugins] search, absolute
  std::vector<std::filesystem::path> plugin_use;     ///< [plugins] use: chosen libraries, absolute
  std::optional<ComponentSection> model;
  std::optional<ComponentSection> adapter;  ///< [adapter]: grafted onto the model when it is built
  std::vector<StageSection> stages;
  std::optional<ComponentSection> sampler;
  /// [accountants.<id>] option tables, for every accountant the recipe uses.
  std::map<std::string, sdk::Config> accountants;
  /// [[eval]] entries: evaluations run after training.
  std::vector<EvalSection> evals;
  std::optional<SweepSection> sweep;
  /// Accountants the recipe names ([privacy] accountant first, then report), without repeats.
  std::vector<std::string> accountant_ids;

  /// Where each key given in the recipe (and each section) is: "file:line:col", or "--set '...'"
  /// for a value from the command line, by key path ("stage[0].steps", "adapter").
  std::map<std::string, Diagnostic> locations;

  /// A diagnostic at `key_path`'s place in the recipe (or its section's, for a key left at its
  /// default; the file's when neither is known): what a check after validation reports a key's
  /// value with, e.g. `recipe.toml:20:11: adapter.targets: "x" matches no Linear layer's name`.
  Diagnostic diagnostic(const std::string& key_path, std::string message) const;

  /// The dataset named `name`; throws std::out_of_range when there is none.
  const DataSection& dataset(const std::string& name) const;

  /// The recipe with every default written out, as TOML: what actually ran.
  std::string to_toml() const;
};

}  // namespace privdiff::core
