#include "recipe/recipe_text_guard.hpp"

#include <cstdint>

namespace privdiff::core {

namespace {

// Length of the well-formed UTF-8 sequence at text[i] (1 for ASCII), or 0 when malformed
// (bad lead or continuation byte, overlong form, surrogate, beyond U+10FFFF, truncated).
std::size_t utf8_length(const std::string& text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
  const std::uint8_t b = byte(i);
  if (b < 0x80) return 1;
  std::size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
  if (n == 0 || b > 0xF4 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  const std::uint8_t c = byte(i + 1);
  if ((b == 0xE0 && c < 0xA0) || (b == 0xED && c >= 0xA0) || (b == 0xF0 && c < 0x90) || (b == 0xF4 && c >= 0x90)) {
    return 0;  // overlong, surrogate, > U+10FFFF
  }
  return n;
}

}  // namespace

std::optional<Diagnostic> unsafe_toml_text(const std::string& text, const std::string& display_name) {
  enum class State { bare, comment, basic, literal, multiline_basic, multiline_literal } state = State::bare;
  bool trimming = false;  // in a multi-line basic string, after a line-ending backslash
  // Bare text: inside a token; in a token that began like a number in a value; in a value (after '=' on
  // its line, or inside the brackets it opened) and how deep in its brackets.
  bool in_token = false, number_token = false, value = false;
  int depth = 0;
  std::size_t line = 1, column = 1;
  auto problem = [&](std::string what) { return diagnostic_at_position(display_name, line, column, "", std::move(what)); };
  auto starts = [&](std::size_t i, const char* s) { return text.compare(i, std::char_traits<char>::length(s), s) == 0; };
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    if (n == 0) return problem("malformed UTF-8 (a recipe must be UTF-8 text)");
    const char ch = text[i];
    if (n > 1) {
      if (state == State::bare) {
        return problem("non-ASCII character outside a string or comment (TOML allows them only inside quotes)");
      }
      if (trimming) return problem("non-ASCII character right after a line-ending backslash in a string");
    } else if (state == State::bare) {
      // toml++ reads a value that began like a number (2'x', 1e"x", 0x1f['x') up to a value terminator
      // as one malformed number, and misbehaves on a non-ASCII character in it (undefined behaviour in
      // its Unicode tables). Here a quote inside such a token opens no string, so what follows it is
      // refused above. Keys (0 = "x") are not values: their quotes still open strings.
      const bool terminator = ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == ',' || ch == ']' ||
                              ch == '}' || ch == '#';
      const bool boundary = terminator || ch == '=' || ch == '[' || ch == '{';
      if (number_token) {
        number_token = !terminator;
      } else if (value && !in_token && ((ch >= '0' && ch <= '9') || ch == '+' || ch == '-')) {
        number_token = true;
      }
      in_token = number_token || !boundary;
      if (ch == '=') value = true;
      if (value && (ch == '[' || ch == '{')) ++depth;
      if (value && (ch == ']' || ch == '}') && depth > 0) --depth;
      if (number_token && (ch == '"' || ch == '\'')) {
        // not a string: stays bare
      } else if (ch == '#') state = State::comment;
      else if (starts(i, "\"\"\"")) { state = State::multiline_basic; i += 3; column += 3; continue; }
      else if (starts(i, "'''")) { state = State::multiline_literal; i += 3; column += 3; continue; }
      else if (ch == '"') state = State::basic;
      else if (ch == '\'') state = State::literal;
    } else if (state == State::comment) {
      if (ch == '\n') state = State::bare;
    } else if (state == State::basic) {
      if (ch == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {  // an escape: skip the escaped character
        const std::size_t escaped = utf8_length(text, i + 1);
        if (escaped == 0) { ++column; i += 1; continue; }  // reported as malformed next round
        i += 1 + escaped;
        column += 2;
        continue;
      }
      if (ch == '"' || ch == '\n') state = State::bare;  // an unterminated string is toml++'s to report
    } else if (state == State::literal) {
      if (ch == '\'' || ch == '\n') state = State::bare;
    } else if (state == State::multiline_basic) {
      if (trimming && ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') trimming = false;
      if (ch == '\\') {
        std::size_t j = i + 1;
        while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) ++j;
        if (j < text.size() && text[j] == '\n') trimming = true;
        else if (j < text.size() && utf8_length(text, i + 1) > 0) {  // an escape: skip the escaped character
          i += 1 + utf8_length(text, i + 1);
          column += 2;
          continue;
        }
      } else if (starts(i, "\"\"\"")) {
        state = State::bare;
        i += 3;
        column += 3;
        continue;
      }
    } else if (state == State::multiline_literal && starts(i, "'''")) {
      state = State::bare;
      i += 3;
      column += 3;
      continue;
    }
    if (ch == '\n' && state == State::bare && depth == 0) value = false;  // the value's line ended
    if (ch == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += n;
  }
  return std::nullopt;
}

}  // namespace privdiff::core
