#include "data/prompt_check.hpp"

#include "data/dataset_identity.hpp"

#include <privdiff/text/caption_sources.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

std::string trimmed(const std::string& s) {
  const char* space = " \t\r\n\f\v";
  const std::size_t a = s.find_first_not_of(space);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(space) - a + 1);
}

std::string quoted(const std::string& text) { return "'" + (text.size() > 80 ? text.substr(0, 77) + "..." : text) + "'"; }

}  // namespace

std::vector<Prompt> read_prompts(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw std::invalid_argument(file.string() + ": no such file (a prompts file)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument(file.string() + ": cannot be opened");
  std::vector<Prompt> prompts;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    std::string text = trimmed(line);
    if (text.empty()) continue;
    const std::string where = file.string() + ":" + std::to_string(number);
    if (const std::string why = sdk::caption_problem(text); !why.empty()) throw std::invalid_argument(where + ": " + why);
    prompts.push_back({std::move(text), where});
  }
  if (prompts.empty()) throw std::invalid_argument(file.string() + ": holds no prompt (one per line)");
  return prompts;
}

std::vector<PromptMatch> private_prompts(const std::vector<Prompt>& prompts, const std::vector<RecordSet>& sets,
                                         const RecordKey& key) {
  std::vector<PromptMatch> out;
  for (const Prompt& prompt : prompts) {
    const std::uint64_t digest = caption_digest(prompt.text);
    const std::uint64_t keyed = siphash24(key.key, &digest, sizeof digest);
    for (const RecordSet& set : sets) {
      if (!set.is_private || set.key_id == outside_weights_key) continue;
      const std::string of = set.description + ", which " + set.origin + " trained on privately";
      if (set.key_id != key.id) {  // another key, or an ancestry whose data were never recorded ("unknown")
        out.push_back({prompt, "cannot be compared with the captions of " + of +
                                   (set.key_id == unknown_ancestry_key ? " (its data were not recorded)"
                                                            : " (recorded under another record key)")});
        break;
      }
      if (set.caption_hashes.empty()) continue;  // data without captions
      if (std::binary_search(set.caption_hashes.begin(), set.caption_hashes.end(), keyed)) {
        out.push_back({prompt, "is one of the private captions of " + of + " (compared after case, spacing and "
                               "punctuation)"});
        break;
      }
    }
  }
  return out;
}

std::string prompt_refusal(const std::vector<PromptMatch>& matches, const std::string& opt_in) {
  if (matches.empty()) return "";
  std::string out = std::to_string(matches.size()) + " prompt(s) may be private captions:";
  for (std::size_t i = 0; i < matches.size() && i < 5; ++i) {
    out += "\n  " + matches[i].prompt.where + ": the prompt " + quoted(matches[i].prompt.text) + " " + matches[i].what;
  }
  if (matches.size() > 5) out += "\n  … and " + std::to_string(matches.size() - 5) + " more";
  return out + "\nSamples drawn from private captions release those captions, whatever epsilon the model cost. Use "
               "public text or captions released under DP, or " + opt_in + " to sample anyway (the run's "
               "privacy.json, summary.json and ledger then carry a caveat, and so do its exports and evaluations)";
}

std::string private_prompt_caveat(const std::vector<PromptMatch>& matches, const std::string& opt_in) {
  return "samples were drawn with " + std::to_string(matches.size()) + " prompt(s) that are (or could not be shown "
         "not to be) private training captions, e.g. " + matches.front().prompt.where + " (" + opt_in + "): "
         "those samples and anything computed from them are outside the guarantee";
}

}  // namespace privdiff::core
