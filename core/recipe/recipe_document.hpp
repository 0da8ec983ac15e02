#pragma once
// A recipe as parsed TOML (with source positions) plus the `--set key=value` overrides applied
// to it. Validation against the schemas happens afterwards (recipe_validator.hpp), so a value
// from the command line is checked exactly like one from the file.

#include "recipe/diagnostic.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

class RecipeDocument {
 public:
  /// Parses a recipe file. Throws RecipeError (file:line:col, "malformed TOML: ...") for bad
  /// syntax and for an unreadable file.
  static RecipeDocument load(const std::filesystem::path& file);
  /// Parses recipe text; `display_name` is used in locations (tests, stdin).
  static RecipeDocument parse(const std::string& text, const std::string& display_name);

  /// Applies `key.path=value` assignments in order, e.g. "stage.0.epochs=3" or
  /// "stage[0].epochs=3", "model.channel_mult=[1,2,2]", "model.type=pixel_unet". The value is
  /// parsed as a TOML value; text that is not valid TOML is taken as a string. Returns one
  /// diagnostic per assignment that cannot be applied (bad syntax, index out of range, path
  /// through a non-table).
  std::vector<Diagnostic> apply_overrides(const std::vector<std::string>& assignments);

  /// Drops a top-level section (e.g. "sampler", to replace it whole from the command line).
  void remove_section(const std::string& name) { root_.erase(name); }
  const toml::table& root() const { return root_; }
  /// As given by the user (used in locations).
  const std::string& file() const { return file_; }
  /// Directory the recipe's relative paths are resolved against.
  std::filesystem::path base_directory() const;

  /// Location of the value at `key_path` (e.g. "stage[0].epochs"): "--set '...'" when it or a
  /// table above it came from the command line, otherwise file:line:col of `node`.
  Diagnostic diagnostic_at(const toml::node& node, const std::string& key_path, std::string message) const;
  /// The same for a source region, e.g. a key's (to point at a misspelt key rather than its value).
  Diagnostic diagnostic_at(const toml::source_region& source, const std::string& key_path,
                           std::string message) const;
  /// The raw command-line text of an overridden value (so a string key accepts `--set run.name=123`).
  std::optional<std::string> override_text(const std::string& key_path) const;

 private:
  struct Override {
    std::string assignment;  ///< the whole "--set" argument
    std::string raw_value;
  };
  std::string file_;
  toml::table root_;
  std::map<std::string, Override> overrides_;  // by canonical key path
};

/// "stage[1].epochs" from a parent path and a key or index.
std::string child_path(const std::string& parent, const std::string& key);
std::string child_path(const std::string& parent, std::size_t index);

}  // namespace privdiff::core
