#include "sample/sample_prompts.hpp"

#include "data/record_key.hpp"
#include "data/record_set.hpp"

#include <privdiff/io/atomic_file.hpp>
#include <privdiff/text/caption_sources.hpp>

#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

std::vector<Prompt> sample_prompts(const std::vector<std::string>& inline_prompts, const std::string& file,
                                   const std::string& source) {
  std::vector<Prompt> prompts;
  for (std::size_t i = 0; i < inline_prompts.size(); ++i) {
    const std::string& text = inline_prompts[i];
    const std::string where = source == "--prompt" ? source : source + "[" + std::to_string(i) + "]";
    if (text.empty()) throw std::invalid_argument(where + ": an empty prompt");
    if (const std::string why = sdk::caption_problem(text); !why.empty()) {
      throw std::invalid_argument(where + " '" + text + "': " + why);
    }
    prompts.push_back({text, where});
  }
  if (!file.empty()) {
    for (Prompt& p : read_prompts(file)) prompts.push_back(std::move(p));
  }
  return prompts;
}

std::vector<PromptMatch> private_prompts_of_run(const std::vector<Prompt>& prompts, const fs::path& run_dir) {
  const fs::path file = run_dir / record_sets_file;
  std::vector<RecordSet> sets;
  try {
    sets = record_sets_from_bytes(sdk::read_file(file));
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": " + e.what() + " (the run's record of its private data: without it "
                             "the prompts cannot be checked against its captions)");
  }
  return private_prompts(prompts, sets, record_key());
}

}  // namespace privdiff::core
