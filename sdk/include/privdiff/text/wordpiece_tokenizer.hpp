#pragma once
/// @file
/// WordPieceTokenizer: BERT's lower-case WordPiece, as HF's BertTokenizerFast (what CompVis's
/// BERTTokenizer and diffusers' LDMBert pipeline call) gives it: clean (controls dropped, whitespace
/// to spaces), a space around each CJK ideograph, accents stripped (NFD, marks dropped), lower case,
/// split on whitespace and punctuation, greedy longest-match WordPiece with "##" continuations, a word
/// over 100 characters or with no match as [UNK]; [CLS] … [SEP], cut to the context length. The
/// special tokens written literally in a caption ("[SEP]") are those tokens, as in the reference.
/// Unicode classes are those of the reference's tables (Unicode 8.0): see docs/text.md.

#include <privdiff/text/tokenizer.hpp>

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API WordPieceTokenizer final : public Tokenizer {
 public:
  /// A vocab.txt: one token a line, its id its line's index from 0 (bert-base-uncased's). Refused
  /// (std::invalid_argument "FILE:LINE: …"): an empty line, a token twice, a token with whitespace,
  /// text that is not UTF-8, no [PAD]/[UNK]/[CLS]/[SEP]/[MASK].
  static WordPieceTokenizer from_file(const std::filesystem::path& vocab_txt, std::size_t context_length = 77);
  /// `tokens[i]` has id i; `source` names them in errors.
  WordPieceTokenizer(std::vector<std::string> tokens, std::size_t context_length, const std::string& source);

  std::vector<std::int64_t> encode(std::string_view utf8_text) const override;
  std::size_t context_length() const override { return context_length_; }
  std::int64_t pad_id() const override { return pad_; }
  std::size_t vocabulary_size() const override { return ids_.size(); }

 private:
  void word_pieces(const std::u32string& word, std::vector<std::int64_t>& out) const;
  void encode_plain(std::string_view text, std::vector<std::int64_t>& out) const;

  std::unordered_map<std::string, std::int64_t> ids_;  ///< the vocabulary: token → its line's index
  std::size_t context_length_;
  std::int64_t pad_ = 0, unk_ = 0, cls_ = 0, sep_ = 0, mask_ = 0;
};

}  // namespace privdiff::sdk
