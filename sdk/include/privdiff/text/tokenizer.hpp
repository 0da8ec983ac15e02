#pragma once
/// @file
/// Tokenizer: a caption to the token ids a text encoder reads. The SDK's two (WordPieceTokenizer for
/// BERT, ClipTokenizer for CLIP) give the ids their reference implementations give, checked on a fixture
/// corpus (docs/text.md says which references and where they differ from each other).

#include <privdiff/sdk_api.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace privdiff::sdk {

/// A caption's ids padded to the context length, and which of them are the caption's (1) or padding (0).
struct PaddedTokens {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> mask;
};

/// Thread-safe after construction: encode() is const and keeps no cache.
class PRIVDIFF_SDK_API Tokenizer {
 public:
  /// The longest caption encode() takes: a caption is a sentence or a paragraph and the encoder reads
  /// 77 tokens; a longer text (a damaged caption file, a whole document) is refused rather than
  /// tokenized for minutes.
  static constexpr std::size_t kMaxCaptionBytes = 16384;

  virtual ~Tokenizer();
  /// The ids of `utf8_text` with the start and end tokens, cut to context_length() (the caption's
  /// first tokens kept, the end token last), unpadded. std::invalid_argument for text that is not
  /// valid UTF-8 (naming the byte) or longer than kMaxCaptionBytes.
  virtual std::vector<std::int64_t> encode(std::string_view utf8_text) const = 0;
  virtual std::size_t context_length() const = 0;
  virtual std::int64_t pad_id() const = 0;
  virtual std::size_t vocabulary_size() const = 0;
  /// encode() padded with pad_id() to context_length().
  PaddedTokens padded(std::string_view utf8_text) const;

 protected:
  /// Refuses a caption over kMaxCaptionBytes.
  static void check_length(std::string_view utf8_text);
  /// How many content ids fit: context_length() less the start and end tokens.
  std::size_t content_room() const { return context_length() - 2; }
  /// start, the content cut to content_room(), end.
  std::vector<std::int64_t> framed(std::vector<std::int64_t> content, std::int64_t start, std::int64_t end) const;
};

}  // namespace privdiff::sdk
