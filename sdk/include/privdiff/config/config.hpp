#pragma once
/// @file
/// Config: the validated, typed view of one component's recipe section that a factory receives.
/// Every declared key with a default is present; values already satisfy the schema. Plugins never
/// parse TOML.

#include <privdiff/config/value.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk {

/// Thrown when a component asks a Config for a key it did not declare or with the wrong type:
/// a bug in the component, reported with the key path.
class PRIVDIFF_SDK_API ConfigError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
  ~ConfigError() override;
};

class PRIVDIFF_SDK_API Config {
 public:
  Config() = default;
  /// `path` is the recipe key path of the section, e.g. "stage[1]" or "model" (for messages).
  Config(std::string path, std::map<std::string, ConfigValue> values)
      : path_(std::move(path)), values_(std::move(values)) {}

  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const ConfigValue& value(const std::string& key) const;
  const std::map<std::string, ConfigValue>& values() const { return values_; }

  bool get_bool(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  /// Accepts an integer value too.
  double get_double(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::int64_t>& get_int_list(const std::string& key) const;
  const std::vector<double>& get_double_list(const std::string& key) const;
  const std::vector<std::string>& get_string_list(const std::string& key) const;
  /// True when a numeric key holds one of its keywords, e.g. noise_multiplier = "auto".
  bool is_keyword(const std::string& key, const std::string& keyword) const;

 private:
  template <class T>
  const T& get_as(const std::string& key, const char* type_name) const;

  std::string path_;
  std::map<std::string, ConfigValue> values_;
};

class Schema;

/// Builds the Config a component would get from a recipe section holding `values`: every value
/// is checked against `schema` and every missing key with a default is filled in. For programmatic
/// use (tests, the `account` command). Throws std::invalid_argument naming path.key for an unknown
/// key, a value the key rejects, or a missing required key.
PRIVDIFF_SDK_API Config make_config(const Schema& schema, const std::string& path,
                                    std::map<std::string, ConfigValue> values = {});

}  // namespace privdiff::sdk
