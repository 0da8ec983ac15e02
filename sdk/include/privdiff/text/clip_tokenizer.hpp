#pragma once
/// @file
/// ClipTokenizer: CLIP's byte-level BPE as HF's CLIPTokenizerFast gives it (Stable Diffusion's
/// pipelines): NFC, runs of whitespace to one space, lower case; split into contractions ('s 't 're 've
/// 'm 'll 'd), runs of letters, single digits and runs of other non-space characters; each piece's UTF-8
/// bytes as CLIP's byte characters, merged by the merges' ranks with "</w>" on the last; <|startoftext|>
/// … <|endoftext|>, cut to the context length with <|endoftext|> kept last. <|startoftext|> and
/// <|endoftext|> written in a caption (in any case) are those tokens, as in the reference. open_clip's
/// and OpenAI's tokenizers clean the text with ftfy and html.unescape first: on text those leave alone,
/// the ids are theirs too (docs/text.md).

#include <privdiff/text/tokenizer.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API ClipTokenizer final : public Tokenizer {
 public:
  /// CLIP's 49,408 tokens: the 48,894 merges CLIP uses (fewer when the file has fewer).
  static constexpr std::size_t kClipMerges = 48894;
  /// What pads a caption: <|endoftext|> (SD 1.x's tokenizer, HF's CLIPTokenizer) or id 0, "!" (open_clip's
  /// and SD 2.x's).
  enum class Padding { end_of_text, zero };

  /// A merges file: open_clip's bpe_simple_vocab_16e6.txt.gz or HF's merges.txt (plain or gzip), a
  /// "#version" line then one merge a line, "LEFT RIGHT". The vocabulary is CLIP's: the 256 byte
  /// characters, the same with "</w>", each merge's result in order, then <|startoftext|>,
  /// <|endoftext|>. Refused (std::invalid_argument "FILE:LINE: …"): no "#version" line, a merge that is
  /// not two symbols, a symbol not made by an earlier merge, a merge twice.
  static ClipTokenizer from_file(const std::filesystem::path& merges, std::size_t context_length = 77,
                                 Padding padding = Padding::end_of_text, std::size_t max_merges = kClipMerges);

  std::vector<std::int64_t> encode(std::string_view utf8_text) const override;
  std::size_t context_length() const override { return context_length_; }
  std::int64_t pad_id() const override { return padding_ == Padding::zero ? 0 : end_; }
  std::size_t vocabulary_size() const override { return ids_.size(); }
  std::int64_t start_id() const { return start_; }
  std::int64_t end_id() const { return end_; }

 private:
  ClipTokenizer(std::size_t context_length, Padding padding);
  struct Merge {
    std::size_t rank;
    std::int64_t result;
  };
  /// Adds `token` (new: the file's checks see to it) with the next id, and returns that id.
  std::int64_t add_token(const std::string& token);
  void encode_piece(const std::string& bytes, std::vector<std::int64_t>& out) const;
  void encode_plain(const std::u32string& text, std::vector<std::int64_t>& out) const;

  std::unordered_map<std::string, std::int64_t> ids_;  ///< the vocabulary: token → id, from 0
  std::unordered_map<std::uint64_t, Merge> merges_;  ///< (left id << 32 | right id) → rank and result
  std::vector<std::int64_t> byte_id_, last_byte_id_;  ///< a byte's symbol, and with "</w>"
  std::size_t context_length_;
  Padding padding_;
  std::int64_t start_ = 0, end_ = 0;
};

}  // namespace privdiff::sdk
