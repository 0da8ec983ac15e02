#include <privdiff/text/tokenizer.hpp>

namespace privdiff::sdk {

Tokenizer::~Tokenizer() = default;

PaddedTokens Tokenizer::padded(std::string_view utf8_text) const {
  PaddedTokens out;
  out.ids = encode(utf8_text);
  out.mask.assign(out.ids.size(), 1);
  out.ids.resize(context_length(), pad_id());
  out.mask.resize(context_length(), 0);
  return out;
}

}  // namespace privdiff::sdk
