#include <privdiff/config/config.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/config/schema.hpp>

#include <stdexcept>

namespace privdiff::sdk {

ConfigError::~ConfigError() = default;

KeyValueError::KeyValueError(const std::string& key_path, const std::string& problem)
    : std::invalid_argument(key_path + ": " + problem), key_path_(key_path), problem_(problem) {}
KeyValueError::~KeyValueError() = default;

const ConfigValue& Config::value(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    throw ConfigError(path_ + "." + key + ": not set (the component read a key its schema does not declare, "
                      "or an optional key without checking has())");
  }
  return it->second;
}

template <class T>
const T& Config::get_as(const std::string& key, const char* type_name) const {
  const ConfigValue& v = value(key);
  if (auto* p = std::get_if<T>(&v)) return *p;
  throw ConfigError(path_ + "." + key + ": read as " + type_name + " but holds " + to_toml(v));
}

bool Config::get_bool(const std::string& key) const { return get_as<bool>(key, "boolean"); }
std::int64_t Config::get_int(const std::string& key) const { return get_as<std::int64_t>(key, "integer"); }
double Config::get_double(const std::string& key) const {
  const ConfigValue& v = value(key);
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return get_as<double>(key, "number");
}
const std::string& Config::get_string(const std::string& key) const {
  return get_as<std::string>(key, "string");
}
const std::vector<std::int64_t>& Config::get_int_list(const std::string& key) const {
  return get_as<std::vector<std::int64_t>>(key, "list of integers");
}
const std::vector<double>& Config::get_double_list(const std::string& key) const {
  return get_as<std::vector<double>>(key, "list of numbers");
}
const std::vector<std::string>& Config::get_string_list(const std::string& key) const {
  return get_as<std::vector<std::string>>(key, "list of strings");
}
bool Config::is_keyword(const std::string& key, const std::string& keyword) const {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  auto* s = std::get_if<std::string>(&it->second);
  return s && *s == keyword;
}

Config make_config(const Schema& schema, const std::string& path, std::map<std::string, ConfigValue> values) {
  for (auto& [name, value] : values) {
    const Key* key = schema.find(name);
    if (!key) throw std::invalid_argument(path + "." + name + ": unknown key");
    if (key->type() == ValueType::number) {
      if (auto* i = std::get_if<std::int64_t>(&value)) value = static_cast<double>(*i);
    }
    if (!key->accepts(value)) {
      throw std::invalid_argument(path + "." + name + ": expected " + key->expectation() + ", got " + to_toml(value));
    }
  }
  for (const auto& key : schema.keys()) {
    if (values.count(key.name())) continue;
    if (key.default_value()) values[key.name()] = *key.default_value();
    else if (key.is_required()) throw std::invalid_argument(path + "." + key.name() + ": missing required key");
  }
  return Config(path, std::move(values));
}

}  // namespace privdiff::sdk
