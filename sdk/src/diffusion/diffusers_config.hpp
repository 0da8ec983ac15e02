#pragma once
// Reading a diffusers config.json for privdiff's ports (internal to the SDK): the JSON of one model
// class, and refusals of the options a port lacks, each naming the key.

#include <privdiff/io/json_error.hpp>

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace privdiff::sdk::diffusion {

/// The config's JSON, once its _class_name is `class_name`; std::invalid_argument naming `what`
/// otherwise.
inline nlohmann::json diffusers_config_json(const std::string& text, const std::string& what,
                                            const std::string& class_name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": not valid JSON (" + json_error_text(e) + ")");
  }
  if (j.value("_class_name", "") != class_name) {
    throw std::invalid_argument(what + ": _class_name is " + j.value("_class_name", std::string("missing")) + ", not " +
                                class_name);
  }
  return j;
}

/// Refuses `key` unless it is absent, null or `expected`: the one value privdiff's port of
/// `class_name` supports.
inline void require_diffusers_value(const nlohmann::json& j, const std::string& key, const nlohmann::json& expected,
                                    const std::string& what, const std::string& class_name) {
  if (!j.contains(key) || j[key].is_null() || j[key] == expected) return;
  throw std::invalid_argument(what + ": " + key + " = " + j[key].dump() + " is not supported by privdiff's " + class_name +
                              " (only " + expected.dump() + ")");
}

}  // namespace privdiff::sdk::diffusion
