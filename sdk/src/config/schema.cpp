#include <privdiff/config/schema.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace privdiff::sdk {

Key Key::boolean(std::string name) { return Key(std::move(name), ValueType::boolean); }
Key Key::integer(std::string name) { return Key(std::move(name), ValueType::integer); }
Key Key::number(std::string name) { return Key(std::move(name), ValueType::number); }
Key Key::string(std::string name) { return Key(std::move(name), ValueType::string); }
Key Key::integer_list(std::string name) { return Key(std::move(name), ValueType::integer_list); }
Key Key::number_list(std::string name) { return Key(std::move(name), ValueType::number_list); }
Key Key::string_list(std::string name) { return Key(std::move(name), ValueType::string_list); }

namespace {

bool is_numeric(ValueType t) {
  return t == ValueType::integer || t == ValueType::number || t == ValueType::integer_list ||
         t == ValueType::number_list;
}
bool is_stringy(ValueType t) { return t == ValueType::string || t == ValueType::string_list; }

std::string format_bound(double v) {
  // A whole bound in full ("at most 1000000000", not "1e+09"); others as TOML writes them.
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  std::string s = to_toml(ConfigValue{v});
  // 1.0 reads better as 1 in "integer >= 1"; keep fractional bounds as they are.
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

}  // namespace

Key& Key::defaults(ConfigValue value) {
  // Integers are accepted for number keys and widened, as in recipes.
  if (type_ == ValueType::number) {
    if (auto* i = std::get_if<std::int64_t>(&value)) value = static_cast<double>(*i);
  }
  if (type_ == ValueType::number_list) {
    if (auto* l = std::get_if<std::vector<std::int64_t>>(&value)) {
      value = std::vector<double>(l->begin(), l->end());
    }
  }
  default_ = std::move(value);
  return *this;
}
Key& Key::optional() {
  optional_ = true;
  return *this;
}
Key& Key::at_least(double min) {
  min_ = min;
  min_exclusive_ = false;
  return *this;
}
Key& Key::greater_than(double min) {
  min_ = min;
  min_exclusive_ = true;
  return *this;
}
Key& Key::at_most(double max) {
  max_ = max;
  max_exclusive_ = false;
  return *this;
}
Key& Key::less_than(double max) {
  max_ = max;
  max_exclusive_ = true;
  return *this;
}
Key& Key::one_of(std::vector<std::string> choices) {
  choices_ = std::move(choices);
  return *this;
}
Key& Key::or_keyword(std::string keyword) {
  keywords_.push_back(std::move(keyword));
  return *this;
}
Key& Key::doc(std::string text) {
  doc_ = std::move(text);
  return *this;
}

std::string Key::expectation() const {
  std::string out = to_string(type_);
  if (min_ && max_) {
    out += std::string(" in ") + (min_exclusive_ ? "(" : "[") + format_bound(*min_) + ", " +
           format_bound(*max_) + (max_exclusive_ ? ")" : "]");
  } else if (min_) {
    out += (min_exclusive_ ? " > " : " >= ") + format_bound(*min_);
  } else if (max_) {
    out += (max_exclusive_ ? " < " : " <= ") + format_bound(*max_);
  }
  if (!choices_.empty()) {
    out = (type_ == ValueType::string_list ? "list of " : "") + std::string("one of ");
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      out += (i ? ", " : "") + to_toml(ConfigValue{choices_[i]});
    }
  }
  for (const auto& k : keywords_) out += " or " + to_toml(ConfigValue{k});
  return out;
}

bool Key::number_in_range(double v) const {
  if (min_ && (min_exclusive_ ? !(v > *min_) : !(v >= *min_))) return false;
  if (max_ && (max_exclusive_ ? !(v < *max_) : !(v <= *max_))) return false;
  return true;
}

bool Key::accepts(const ConfigValue& value) const {
  auto choice_ok = [&](const std::string& s) {
    return choices_.empty() || std::find(choices_.begin(), choices_.end(), s) != choices_.end();
  };
  switch (type_) {
    case ValueType::boolean: return std::holds_alternative<bool>(value);
    case ValueType::string:
      if (auto* s = std::get_if<std::string>(&value)) return choice_ok(*s);
      return false;
    case ValueType::string_list:
      if (auto* l = std::get_if<std::vector<std::string>>(&value)) {
        return std::all_of(l->begin(), l->end(), choice_ok);
      }
      return false;
    default: break;
  }
  if (auto* s = std::get_if<std::string>(&value)) {
    return std::find(keywords_.begin(), keywords_.end(), *s) != keywords_.end();
  }
  switch (type_) {
    case ValueType::integer:
      if (auto* i = std::get_if<std::int64_t>(&value)) return number_in_range(static_cast<double>(*i));
      return false;
    case ValueType::number:
      if (auto* d = std::get_if<double>(&value)) return number_in_range(*d);
      return false;
    case ValueType::integer_list:
      if (auto* l = std::get_if<std::vector<std::int64_t>>(&value)) {
        return std::all_of(l->begin(), l->end(),
                           [&](std::int64_t x) { return number_in_range(static_cast<double>(x)); });
      }
      return false;
    case ValueType::number_list:
      if (auto* l = std::get_if<std::vector<double>>(&value)) {
        return std::all_of(l->begin(), l->end(), [&](double x) { return number_in_range(x); });
      }
      return false;
    default: return false;
  }
}

Schema& Schema::add(Key key) {
  if (find(key.name())) throw std::invalid_argument("schema declares key '" + key.name() + "' twice");
  if (key.name().empty()) throw std::invalid_argument("schema key with an empty name");
  if (key.has_bounds() && !is_numeric(key.type())) {
    throw std::invalid_argument("schema key '" + key.name() + "': bounds need a numeric key");
  }
  if (!key.choices().empty() && !is_stringy(key.type())) {
    throw std::invalid_argument("schema key '" + key.name() + "': one_of() needs a string key");
  }
  if (!key.keywords().empty() && !is_numeric(key.type())) {
    throw std::invalid_argument("schema key '" + key.name() + "': or_keyword() needs a numeric key");
  }
  if (key.default_value() && !key.accepts(*key.default_value())) {
    throw std::invalid_argument("schema key '" + key.name() + "': default " +
                                to_toml(*key.default_value()) + " is not a valid value (expected " +
                                key.expectation() + ")");
  }
  keys_.push_back(std::move(key));
  return *this;
}

Schema& Schema::document(const std::string& name, std::string doc) {
  for (auto& k : keys_) {
    if (k.name() == name) {
      k.doc(std::move(doc));
      return *this;
    }
  }
  throw std::invalid_argument("schema has no key '" + name + "' to document");
}

Schema& Schema::remove(const std::string& name) {
  const auto it = std::find_if(keys_.begin(), keys_.end(), [&](const Key& k) { return k.name() == name; });
  if (it == keys_.end()) throw std::invalid_argument("schema has no key '" + name + "' to remove");
  keys_.erase(it);
  return *this;
}

const Key* Schema::find(const std::string& name) const {
  for (const auto& k : keys_) {
    if (k.name() == name) return &k;
  }
  return nullptr;
}

}  // namespace privdiff::sdk
