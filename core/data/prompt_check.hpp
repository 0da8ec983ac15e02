#pragma once
// The data-identity service's answer for prompts: is a prompt one of the private captions? A prompt
// set copied from the private captions (DP-LDM's txt2img.py samples with "the first description of
// each training image") releases them verbatim through the samples, whatever the model's guarantee.
//
// Compared in the captions' matching form (privdiff/text/caption_matching.hpp: case, white space and
// punctuation left out) with the caption digests a run keeps in data-records.bin (record_set.hpp) for
// every private dataset it and its init_from ancestry trained on: an exact copy and a copy that differs
// only in case, spacing or punctuation are found; a paraphrase is not. A private set made under another
// record key, or an ancestry whose data were never recorded, cannot be compared, and the answer says so
// (the safe side: it counts as a match). Weights from outside privdiff are no private data of privdiff's.

#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::core {

struct Prompt {
  std::string text;
  std::string where;  ///< "FILE:LINE", or "--prompt" (the command line)
};

/// The prompts of a prompts file: each non-empty line, surrounding white space removed, in order.
/// std::invalid_argument "FILE:LINE: …" for a prompt that is not a caption (caption_problem), and
/// "FILE: …" for a file that holds none or cannot be read.
std::vector<Prompt> read_prompts(const std::filesystem::path& file);

/// A prompt found among (or not comparable with) the private captions.
struct PromptMatch {
  Prompt prompt;
  std::string what;  ///< "one of the private captions of …" or why it could not be compared
};

/// Every prompt that is a private caption of `sets` (in matching form, under `key`) or that a private
/// set under another key leaves unknown. Public sets are not private: a public caption is no match.
std::vector<PromptMatch> private_prompts(const std::vector<Prompt>& prompts, const std::vector<RecordSet>& sets,
                                         const RecordKey& key);

/// A refusal naming each match (the first few), what it matched and what to do (`opt_in`: how to
/// sample anyway, e.g. "--allow-private-prompts"); empty when none.
std::string prompt_refusal(const std::vector<PromptMatch>& matches,
                           const std::string& opt_in = "--allow-private-prompts");

/// The caveat a sample set carries when the user samples with such prompts anyway (`opt_in` as above).
std::string private_prompt_caveat(const std::vector<PromptMatch>& matches,
                                  const std::string& opt_in = "--allow-private-prompts");

}  // namespace privdiff::core
