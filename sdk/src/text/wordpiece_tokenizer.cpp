#include <privdiff/text/wordpiece_tokenizer.hpp>

#include "unicode.hpp"
#include "text_file.hpp"

#include <array>
#include <stdexcept>

namespace privdiff::sdk {
namespace {

constexpr std::size_t kMaxWordChars = 100;  // longer words are [UNK] (HF's max_input_chars_per_word)
constexpr std::array<const char*, 5> kSpecial = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

// The CJK Unified Ideographs blocks BERT spaces out (not Hiragana, Katakana or Hangul), as HF tokenizers'
// bert.rs lists them: from U+2B920, where Python BERT's list has U+2B820 (U+2B820..U+2B91F stay as they are).
bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_ascii_punctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

// BertNormalizer(clean_text, handle_chinese_chars, strip_accents, lowercase), in its order.
std::u32string normalized(const std::u32string& text) {
  std::u32string spaced;
  for (const char32_t c : text) {
    const bool tab_or_line = c == U'\t' || c == U'\n' || c == U'\r';
    if (c == 0 || c == 0xFFFD || (!tab_or_line && unicode::legacy_is_other(c))) continue;
    const char32_t kept = tab_or_line || unicode::is_white_space(c) ? U' ' : c;
    if (is_cjk(kept)) {
      spaced += U' ';
      spaced += kept;
      spaced += U' ';
    } else {
      spaced += kept;
    }
  }
  std::u32string stripped;
  for (const char32_t c : unicode::nfd(spaced))
    if (!unicode::legacy_is_nonspacing_mark(c)) stripped += c;
  return unicode::lower_each(stripped);
}

// BertPreTokenizer: words between whitespace, each punctuation character a word of its own.
std::vector<std::u32string> words_of(const std::u32string& text) {
  std::vector<std::u32string> words;
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (const char32_t c : text) {
    if (unicode::is_white_space(c)) {
      flush();
    } else if (is_ascii_punctuation(c) || unicode::legacy_is_punctuation(c)) {
      flush();
      words.emplace_back(1, c);
    } else {
      word += c;
    }
  }
  flush();
  return words;
}

std::int64_t required(const std::unordered_map<std::string, std::int64_t>& ids, const char* token,
                      const std::string& source) {
  const auto found = ids.find(token);
  if (found == ids.end())
    throw std::invalid_argument(source + ": has no " + token + " token (a BERT vocab.txt has all of "
                                "[PAD] [UNK] [CLS] [SEP] [MASK])");
  return found->second;
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_file(const std::filesystem::path& vocab_txt, std::size_t context_length) {
  std::vector<std::string> lines = text_file::read_lines(vocab_txt, "a tokenizer's vocabulary file");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto at = [&](const std::string& problem) { return text_file::error_at(vocab_txt, i + 1, problem); };
    std::u32string token;
    try {
      token = unicode::decode(lines[i]);
    } catch (const std::invalid_argument& e) {
      throw at(e.what());
    }
    if (token.empty()) throw at("an empty line (a vocab.txt has one token a line)");
    for (const char32_t c : token)
      if (unicode::is_white_space(c) || c == U'\r')
        throw at("a token with whitespace in it" + std::string(c == U'\r' ? " (Windows line ends?)" : ""));
  }
  return WordPieceTokenizer(std::move(lines), context_length, vocab_txt.string());
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> tokens, std::size_t context_length,
                                       const std::string& source)
    : context_length_(context_length) {
  if (context_length_ < 2) throw std::invalid_argument(source + ": a context length of at least 2 ([CLS] and [SEP])");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto [it, fresh] = ids_.emplace(std::move(tokens[i]), static_cast<std::int64_t>(i));
    if (!fresh)
      throw std::invalid_argument(source + ":" + std::to_string(i + 1) + ": token '" + it->first +
                                  "' again (first on line " + std::to_string(it->second + 1) + ")");
  }
  pad_ = required(ids_, "[PAD]", source);
  unk_ = required(ids_, "[UNK]", source);
  cls_ = required(ids_, "[CLS]", source);
  sep_ = required(ids_, "[SEP]", source);
  mask_ = required(ids_, "[MASK]", source);
}

void WordPieceTokenizer::word_pieces(const std::u32string& word, std::vector<std::int64_t>& out) const {
  if (word.size() > kMaxWordChars) {
    out.push_back(unk_);
    return;
  }
  std::vector<std::int64_t> pieces;
  for (std::size_t start = 0; start < word.size();) {
    std::size_t end = word.size();
    std::int64_t id = -1;
    for (; end > start; --end) {
      const std::string piece = (start > 0 ? "##" : "") + unicode::encode(word.substr(start, end - start));
      const auto found = ids_.find(piece);
      if (found != ids_.end()) {
        id = found->second;
        break;
      }
    }
    if (id < 0) {  // no piece matches: the whole word is unknown
      out.push_back(unk_);
      return;
    }
    pieces.push_back(id);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

void WordPieceTokenizer::encode_plain(std::string_view text, std::vector<std::int64_t>& out) const {
  for (const std::u32string& word : words_of(normalized(unicode::decode(text)))) {
    if (out.size() >= content_room()) return;  // words are independent: what follows would be cut
    word_pieces(word, out);
  }
}

std::vector<std::int64_t> WordPieceTokenizer::encode(std::string_view utf8_text) const {
  check_length(utf8_text);
  unicode::decode(utf8_text);  // refuses what is not UTF-8 before any special token is looked for
  std::vector<std::int64_t> content;
  const std::array<std::int64_t, 5> special_ids = {pad_, unk_, cls_, sep_, mask_};
  std::size_t plain = 0;
  for (std::size_t at = 0; at < utf8_text.size(); ++at) {
    if (utf8_text[at] != '[') continue;
    for (std::size_t s = 0; s < kSpecial.size(); ++s) {
      const std::string_view token = kSpecial[s];
      if (utf8_text.substr(at, token.size()) != token) continue;
      encode_plain(utf8_text.substr(plain, at - plain), content);
      content.push_back(special_ids[s]);
      plain = at + token.size();
      at = plain - 1;
      break;
    }
  }
  encode_plain(utf8_text.substr(plain), content);
  return framed(std::move(content), cls_, sep_);
}

}  // namespace privdiff::sdk
