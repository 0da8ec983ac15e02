#pragma once
// Text put into the reports compare writes: a CSV field and HTML text.

#include <string>

namespace privdiff::core {

/// `text` as one CSV field: quoted, with its quotes doubled, when it holds a comma, quote or newline.
inline std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

/// `text` with &, <, > and " as HTML entities.
inline std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace privdiff::core
