#pragma once
/// @file
/// Schemas: how a component declares the recipe keys it accepts (type, default, range, choices,
/// one-line doc). The host validates a whole recipe against the schemas before constructing
/// anything, so components never see a malformed value.
///
///     Schema{}
///       .add(Key::integer("noise_multiplicity").at_least(1).defaults(32)
///              .doc("K noised copies of each example, averaged before clipping"))
///       .add(Key::number("noise_multiplier").greater_than(0).or_keyword("auto").defaults("auto")
///              .doc("sigma, a multiple of max_grad_norm; \"auto\" = calibrated from [privacy]"));

#include <privdiff/config/value.hpp>
#include <privdiff/sdk_api.hpp>

#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk {

/// One key of a schema. Built fluently; every setter returns *this.
class PRIVDIFF_SDK_API Key {
 public:
  static Key boolean(std::string name);
  static Key integer(std::string name);
  static Key number(std::string name);
  static Key string(std::string name);
  static Key integer_list(std::string name);
  static Key number_list(std::string name);
  static Key string_list(std::string name);

  /// Default value; a key with a default is optional. Must itself satisfy the key's constraints.
  Key& defaults(ConfigValue value);
  Key& defaults(const char* value) { return defaults(ConfigValue{std::string(value)}); }
  Key& defaults(int value) { return defaults(ConfigValue{static_cast<std::int64_t>(value)}); }
  Key& defaults(std::int64_t value) { return defaults(ConfigValue{value}); }
  Key& defaults(double value) { return defaults(ConfigValue{value}); }
  Key& defaults(bool value) { return defaults(ConfigValue{value}); }
  /// The key may be left out and then has no value (Config::has() is false).
  Key& optional();
  /// Numeric bounds (for lists: on every element; for strings/lists: not allowed).
  Key& at_least(double min);
  Key& greater_than(double min);
  Key& at_most(double max);
  Key& less_than(double max);
  /// Allowed values of a string key (or of every element of a string list).
  Key& one_of(std::vector<std::string> choices);
  /// A string a numeric key also accepts, e.g. "auto".
  Key& or_keyword(std::string keyword);
  /// One line, shown by `privdiff plugins show` and in docs/recipe-reference.md.
  Key& doc(std::string text);

  const std::string& name() const { return name_; }
  ValueType type() const { return type_; }
  const std::optional<ConfigValue>& default_value() const { return default_; }
  bool is_required() const { return !default_ && !optional_; }
  const std::string& doc_text() const { return doc_; }
  const std::vector<std::string>& choices() const { return choices_; }
  const std::vector<std::string>& keywords() const { return keywords_; }
  bool has_bounds() const { return min_.has_value() || max_.has_value(); }

  /// What this key expects, e.g. `integer >= 1`, `number in (0, 1)`, `one of "edm", "vp"`,
  /// `number > 0 or "auto"`. Used verbatim in "expected ..." messages.
  std::string expectation() const;
  /// True when `value` (already converted to the key's type, or a keyword string) satisfies the
  /// key's type, bounds and choices.
  bool accepts(const ConfigValue& value) const;

 private:
  Key(std::string name, ValueType type) : name_(std::move(name)), type_(type) {}
  bool number_in_range(double v) const;

  std::string name_;
  ValueType type_;
  std::optional<ConfigValue> default_;
  bool optional_ = false;
  std::optional<double> min_, max_;
  bool min_exclusive_ = false, max_exclusive_ = false;
  std::vector<std::string> choices_;
  std::vector<std::string> keywords_;
  std::string doc_;
};

/// The ordered set of keys a component accepts.
class PRIVDIFF_SDK_API Schema {
 public:
  /// Adds a key. Throws std::invalid_argument for a duplicate name or a default that the key's own
  /// constraints reject (so schema bugs surface at registration, as a refused plugin).
  Schema& add(Key key);
  const std::vector<Key>& keys() const { return keys_; }
  /// nullptr when absent.
  const Key* find(const std::string& name) const;
  /// Replaces the doc of a key (one a derived component inherits and gives another meaning, e.g.
  /// max_grad_norm under automatic clipping). Throws std::invalid_argument when absent.
  Schema& document(const std::string& name, std::string doc);
  /// Removes a key a derived component does not accept. Throws std::invalid_argument when absent.
  Schema& remove(const std::string& name);

 private:
  std::vector<Key> keys_;
};

}  // namespace privdiff::sdk
