#pragma once
// The prompts of `privdiff sample --prompt TEXT --prompts FILE`, and their check against the private
// captions of the run that made the model (data/prompt_check.hpp) before any image is drawn.

#include "data/prompt_check.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace privdiff::core {

/// The inline prompts (the command line's --prompt, or a recipe's list, `source` naming them: "--prompt",
/// or "eval[0].prompts" whose entries are then "eval[0].prompts[i]"), each checked as a caption, then
/// the file's (read_prompts). std::invalid_argument naming the prompt or FILE:LINE for a bad one.
std::vector<Prompt> sample_prompts(const std::vector<std::string>& inline_prompts, const std::string& file,
                                   const std::string& source = "--prompt");

/// The prompts that are (or cannot be shown not to be) private captions of the data `run_dir` and its
/// init_from ancestry trained on privately, by its data-records.bin under this user's record key.
/// std::runtime_error naming the file when it is missing or damaged: the prompts cannot then be checked.
std::vector<PromptMatch> private_prompts_of_run(const std::vector<Prompt>& prompts, const std::filesystem::path& run_dir);

}  // namespace privdiff::core
