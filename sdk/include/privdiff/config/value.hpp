#pragma once
/// @file
/// Typed configuration values: what a recipe key holds after validation.

#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace privdiff::sdk {

/// The value types a component may declare for a key.
enum class ValueType {
  boolean,
  integer,       ///< 64-bit signed
  number,        ///< double; an integer in the recipe is accepted and widened
  string,
  integer_list,
  number_list,
  string_list,
};

/// A validated configuration value. The alternative always matches the key's declared ValueType,
/// except that a `number` key with keywords (e.g. noise_multiplier = "auto") may hold a string.
using ConfigValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                                 std::vector<double>, std::vector<std::string>>;

/// "integer", "list of numbers", ... (for messages and `plugins show`).
PRIVDIFF_SDK_API std::string to_string(ValueType type);

/// Renders a value the way it would be written in TOML: 3, 0.5, "edm", [1, 2, 2], true.
PRIVDIFF_SDK_API std::string to_toml(const ConfigValue& value);

/// The shortest decimal text that reads back as `v` (1e-3 -> "0.001", not 17 digits; 2 -> "2"):
/// to_toml's numbers without the ".0" that keeps an integral value a TOML float.
PRIVDIFF_SDK_API std::string shortest_number_text(double v);

}  // namespace privdiff::sdk
