#include <privdiff/text/caption_matching.hpp>

#include "unicode.hpp"

namespace privdiff::sdk {

std::string matching_form(const std::string& caption) {
  std::u32string out;
  bool space = false;
  for (const char32_t c : unicode::nfd(unicode::nfkc_casefold(unicode::decode(caption)))) {
    if (unicode::is_nonspacing_mark(c)) continue;  // accents: "café" and "cafe" (BERT's tokenizer strips them)
    if (unicode::is_punctuation(c) || unicode::is_symbol(c) || unicode::is_white_space(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(U' ');
    space = false;
    out.push_back(c);
  }
  return unicode::encode(out);
}

}  // namespace privdiff::sdk
