#include <privdiff/text/clip_tokenizer.hpp>

#include "unicode.hpp"
#include "text_file.hpp"

#include <stdexcept>

namespace privdiff::sdk {
namespace {

constexpr std::string_view kStart = "<|startoftext|>";
constexpr std::string_view kEnd = "<|endoftext|>";

// CLIP's byte characters (GPT-2's): the printable bytes stand for themselves, the other 68 for
// U+0100 onwards; the vocabulary lists the printable ones first.
bool printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

std::vector<unsigned> byte_order() {
  std::vector<unsigned> order;
  for (unsigned b = 0; b < 256; ++b)
    if (printable(b)) order.push_back(b);
  for (unsigned b = 0; b < 256; ++b)
    if (!printable(b)) order.push_back(b);
  return order;
}

std::string byte_character(unsigned byte) {
  char32_t next = 256;
  for (unsigned b = 0; b < byte; ++b) next += printable(b) ? 0 : 1;
  return unicode::encode(std::u32string(1, printable(byte) ? static_cast<char32_t>(byte) : next));
}

std::uint64_t pair_key(std::int64_t left, std::int64_t right) {
  return static_cast<std::uint64_t>(left) << 32 | static_cast<std::uint64_t>(right);
}

// The pieces of CLIP's split: 's|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+ (leftmost first).
std::vector<std::u32string> pieces_of(const std::u32string& text) {
  std::vector<std::u32string> pieces;
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const char32_t c = text[i];
    std::size_t end = i + 1;
    if (unicode::is_white_space(c)) {
      ++i;
      continue;
    }
    const char32_t next = i + 1 < n ? text[i + 1] : 0, after = i + 2 < n ? text[i + 2] : 0;
    if (c == U'\'' && (next == U's' || next == U't' || next == U'm' || next == U'd')) {
      end = i + 2;
    } else if (c == U'\'' && ((next == U'r' && after == U'e') || (next == U'v' && after == U'e') ||
                              (next == U'l' && after == U'l'))) {
      end = i + 3;
    } else if (unicode::is_letter(c)) {
      while (end < n && unicode::is_letter(text[end])) ++end;
    } else if (!unicode::is_number(c)) {
      while (end < n && !unicode::is_white_space(text[end]) && !unicode::is_letter(text[end]) &&
             !unicode::is_number(text[end]))
        ++end;
    }
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

// CLIPTokenizerFast's normaliser: NFC, each run of whitespace one space, each character lower-cased.
std::u32string normalized(std::string_view utf8) {
  std::u32string collapsed;
  bool in_run = false;
  for (const char32_t c : unicode::nfc(unicode::decode(utf8))) {
    const bool space = unicode::is_white_space(c);
    if (!space) collapsed += c;
    else if (!in_run) collapsed += U' ';
    in_run = space;
  }
  return unicode::lower_each(collapsed);
}

}  // namespace

ClipTokenizer::ClipTokenizer(std::size_t context_length, Padding padding)
    : context_length_(context_length), padding_(padding) {
  if (context_length_ < 2)
    throw std::invalid_argument("CLIP tokenizer: a context length of at least 2 (<|startoftext|>, <|endoftext|>)");
  byte_id_.resize(256);
  last_byte_id_.resize(256);
  const std::vector<unsigned> order = byte_order();
  for (unsigned b : order) byte_id_[b] = add_token(byte_character(b));
  for (unsigned b : order) last_byte_id_[b] = add_token(byte_character(b) + "</w>");
}

std::int64_t ClipTokenizer::add_token(const std::string& token) {
  const auto id = static_cast<std::int64_t>(ids_.size());
  ids_.emplace(token, id);
  return id;
}

ClipTokenizer ClipTokenizer::from_file(const std::filesystem::path& merges, std::size_t context_length,
                                       Padding padding, std::size_t max_merges) {
  const std::vector<std::string> lines = text_file::read_lines(merges, "a tokenizer's vocabulary file");
  if (lines.empty() || lines[0].find("#version") == std::string::npos)
    throw text_file::error_at(merges, 1, "expected the '#version: …' line that starts a CLIP merges file");
  ClipTokenizer tokenizer(context_length, padding);
  std::unordered_map<std::string, std::size_t> made_on;  // a merge's result → its line
  const std::size_t last = std::min(lines.size(), max_merges + 1);
  for (std::size_t i = 1; i < last; ++i) {
    auto at = [&](const std::string& problem) { return text_file::error_at(merges, i + 1, problem); };
    const std::string& line = lines[i];
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw at("expected a merge, two symbols with one space between them: '" + line + "'");
    try {
      unicode::decode(line);
    } catch (const std::invalid_argument& e) {
      throw at(e.what());
    }
    const std::string left = line.substr(0, space), right = line.substr(space + 1);
    for (const std::string* symbol : {&left, &right})
      if (tokenizer.ids_.count(*symbol) == 0)
        throw at("symbol '" + *symbol + "' is neither a byte character nor made by an earlier merge");
    const std::string joined = left + right;
    const auto [first, fresh] = made_on.emplace(joined, i + 1);
    if (!fresh) throw at("the merge makes '" + joined + "' again (first on line " + std::to_string(first->second) + ")");
    const std::uint64_t pair = pair_key(tokenizer.ids_.at(left), tokenizer.ids_.at(right));
    tokenizer.merges_.emplace(pair, Merge{i - 1, tokenizer.add_token(joined)});
  }
  tokenizer.start_ = tokenizer.add_token(std::string(kStart));
  tokenizer.end_ = tokenizer.add_token(std::string(kEnd));
  return tokenizer;
}

// Byte-level BPE over ids: the pair of lowest rank merged, every occurrence left to right, until no
// pair is a merge (open_clip's bpe(), HF's BPE model).
void ClipTokenizer::encode_piece(const std::string& bytes, std::vector<std::int64_t>& out) const {
  std::vector<std::int64_t> word;
  for (const char b : bytes) word.push_back(byte_id_[static_cast<unsigned char>(b)]);
  word.back() = last_byte_id_[static_cast<unsigned char>(bytes.back())];
  while (word.size() > 1) {
    const Merge* best = nullptr;
    std::uint64_t best_key = 0;
    for (std::size_t j = 0; j + 1 < word.size(); ++j) {
      const auto merge = merges_.find(pair_key(word[j], word[j + 1]));
      if (merge != merges_.end() && (!best || merge->second.rank < best->rank)) best = &merge->second, best_key = merge->first;
    }
    if (!best) break;
    std::vector<std::int64_t> merged;
    for (std::size_t j = 0; j < word.size(); ++j) {
      if (j + 1 < word.size() && pair_key(word[j], word[j + 1]) == best_key) {
        merged.push_back(best->result);
        ++j;
      } else {
        merged.push_back(word[j]);
      }
    }
    word = std::move(merged);
  }
  out.insert(out.end(), word.begin(), word.end());
}

void ClipTokenizer::encode_plain(const std::u32string& text, std::vector<std::int64_t>& out) const {
  for (const std::u32string& piece : pieces_of(text)) {
    if (out.size() >= content_room()) return;  // pieces are independent: what follows would be cut
    encode_piece(unicode::encode(piece), out);
  }
}

std::vector<std::int64_t> ClipTokenizer::encode(std::string_view utf8_text) const {
  check_length(utf8_text);
  const std::u32string text = normalized(utf8_text);
  const std::u32string start = unicode::decode(kStart), end = unicode::decode(kEnd);
  std::vector<std::int64_t> content;
  std::size_t plain = 0;
  for (std::size_t at = 0; at < text.size(); ++at) {
    const bool is_start = text.compare(at, start.size(), start) == 0;
    if (!is_start && text.compare(at, end.size(), end) != 0) continue;
    encode_plain(text.substr(plain, at - plain), content);
    content.push_back(is_start ? start_ : end_);
    plain = at + (is_start ? start.size() : end.size());
    at = plain - 1;
  }
  encode_plain(text.substr(plain), content);
  return framed(std::move(content), start_, end_);
}

}  // namespace privdiff::sdk
