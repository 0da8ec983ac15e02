#pragma once
/// @file
/// What a text-conditioned model does with the captions of a batch before its text encoder reads them
/// (header-only, for a model plugin that links privdiff::text): the user's vocabulary read from the
/// recipe key that names it (refused there), caption dropout for classifier-free guidance (each
/// example's caption replaced by the empty caption with probability p, drawn from the loss's generator,
/// so a replay with the same seed drops the same), and the captions' token ids padded to the context.
/// compvis_ldm (CompVis's BERTEmbedder), latent_unet (its text encoder) and diffusers_unet (Stable
/// Diffusion's CLIP text encoder) share it.

#include <privdiff/components/model.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/text/tokenizer.hpp>
#include <privdiff/text/wordpiece_tokenizer.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::text_encoders {

/// The WordPiece vocabulary (a vocab.txt, lower case as CompVis's BERTTokenizer) that config key `key`
/// names, `context` tokens a caption, for the text encoder `who` ("the BERTEmbedder"). KeyValueError at
/// the key when it is unset or the file is refused, or when `vocabulary_size` > 0 and the file holds
/// another number of tokens.
inline WordPieceTokenizer caption_vocabulary(const Config& c, const std::string& key, std::int64_t context,
                                             const std::string& who, std::int64_t vocabulary_size = 0) {
  const std::string at = c.path() + "." + key;
  if (c.get_string(key).empty()) {
    throw KeyValueError(at, "the model conditions on text: " + who + " reads the captions by its vocab.txt (one token "
                            "a line; bert-base-uncased's for CompVis's models)");
  }
  std::optional<WordPieceTokenizer> t;
  try {
    t = WordPieceTokenizer::from_file(c.get_string(key), static_cast<std::size_t>(context));
  } catch (const std::invalid_argument& e) {
    throw KeyValueError(at, e.what());
  }
  if (vocabulary_size > 0 && static_cast<std::int64_t>(t->vocabulary_size()) != vocabulary_size) {
    throw KeyValueError(at, std::to_string(t->vocabulary_size()) + " tokens, but " + who + " has " +
                                std::to_string(vocabulary_size));
  }
  return std::move(*t);
}

/// The batch's captions, each replaced by "" with probability `dropout` (one uniform draw per example
/// from `generator`, whatever the dropout, so the loss's later draws do not depend on it).
inline std::vector<std::string> captions_with_dropout(const Conditioning& cond, std::int64_t examples, double dropout,
                                                      at::Generator& generator) {
  std::vector<std::string> out = cond.captions;
  const at::Tensor u = at::rand({examples}, generator, at::TensorOptions().dtype(at::kDouble));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (u[static_cast<std::int64_t>(i)].item<double>() < dropout) out[i].clear();
  }
  return out;
}

/// The captions' ids padded to the context, int64 [n, context] on `device`; std::invalid_argument
/// naming `model` for a batch without a caption per example (this model reads nothing else).
inline at::Tensor caption_token_ids(const Tokenizer& tokenizer, const std::vector<std::string>& captions,
                                    std::int64_t n, c10::Device device, const std::string& model) {
  if (static_cast<std::int64_t>(captions.size()) != n) {
    throw std::invalid_argument(model + ": the model conditions on text and needs a caption per example (" +
                                std::to_string(captions.size()) + " for " + std::to_string(n) +
                                "): captioned data (docs/captions.md) or prompts");
  }
  std::vector<std::int64_t> ids;
  for (const auto& caption : captions) {
    const PaddedTokens t = tokenizer.padded(caption);
    ids.insert(ids.end(), t.ids.begin(), t.ids.end());
  }
  const auto width = static_cast<std::int64_t>(tokenizer.context_length());
  return at::tensor(ids, at::kLong).view({n, width}).to(device);
}

}  // namespace privdiff::sdk::text_encoders
