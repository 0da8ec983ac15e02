#include <privdiff/text/tokenizer.hpp>

#include <stdexcept>
#include <string>

namespace privdiff::sdk {

Tokenizer::~Tokenizer() = default;

void Tokenizer::check_length(std::string_view utf8_text) {
  if (utf8_text.size() > kMaxCaptionBytes)
    throw std::invalid_argument("a caption of " + std::to_string(utf8_text.size()) + " bytes, over the " +
                                std::to_string(kMaxCaptionBytes) + " a caption may have (the encoder reads " +
                                "its first tokens only)");
}

std::vector<std::int64_t> Tokenizer::framed(std::vector<std::int64_t> content, std::int64_t start, std::int64_t end) const {
  if (content.size() > content_room()) content.resize(content_room());
  content.insert(content.begin(), start);
  content.push_back(end);
  return content;
}

PaddedTokens Tokenizer::padded(std::string_view utf8_text) const {
  PaddedTokens out;
  out.ids = encode(utf8_text);
  out.mask.assign(out.ids.size(), 1);
  out.ids.resize(context_length(), pad_id());
  out.mask.resize(context_length(), 0);
  return out;
}

}  // namespace privdiff::sdk
