#include <privdiff/config/value.hpp>

#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>

namespace privdiff::sdk {

std::string to_string(ValueType type) {
  switch (type) {
    case ValueType::boolean: return "boolean";
    case ValueType::integer: return "integer";
    case ValueType::number: return "number";
    case ValueType::string: return "string";
    case ValueType::integer_list: return "list of integers";
    case ValueType::number_list: return "list of numbers";
    case ValueType::string_list: return "list of strings";
  }
  return "?";
}

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Shortest text that reads back as the same double, always with a '.' or exponent so it stays
// a TOML float.
std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = shortest_number_text(v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

template <class T, class F>
std::string join_list(const std::vector<T>& items, F format) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + format(items[i]);
  return out + "]";
}

}  // namespace

std::string shortest_number_text(double v) {
  for (int precision = 1; precision <= std::numeric_limits<double>::max_digits10; ++precision) {
    std::ostringstream os;
    os << std::setprecision(precision) << v;
    if (std::strtod(os.str().c_str(), nullptr) == v) return os.str();  // (std::stod throws on subnormals)
  }
  return std::to_string(v);
}

std::string to_toml(const ConfigValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_number(v); }
    std::string operator()(const std::string& v) const { return quote(v); }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      return join_list(v, [](std::int64_t x) { return std::to_string(x); });
    }
    std::string operator()(const std::vector<double>& v) const { return join_list(v, format_number); }
    std::string operator()(const std::vector<std::string>& v) const { return join_list(v, quote); }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace privdiff::sdk
