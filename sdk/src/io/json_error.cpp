#include <privdiff/io/json_error.hpp>

#include <string_view>

namespace privdiff::sdk {

std::string json_error_text(const std::exception& e) {
  std::string_view text = e.what();
  constexpr std::string_view tag = "[json.exception.", parse = "parse error at ";
  if (text.substr(0, tag.size()) == tag) {
    const std::size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
    if (text.substr(0, parse.size()) == parse) text.remove_prefix(parse.size());
  }
  return std::string(text);
}

}  // namespace privdiff::sdk
