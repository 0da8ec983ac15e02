// Pre-flight, the prompts of [[eval]]: a text-conditioned model's evaluation samples drawn from the
// recipe's prompts, each checked against the private captions of the run's data and its init_from
// ancestry before the run trains (data/prompt_check.hpp): a prompt copied from them is refused at its
// key (or FILE:LINE), or sampled with a caveat on the run and on the eval (allow_private_prompts).
#include "data/prompt_check.hpp"
#include "data/record_key.hpp"
#include "run/init_from.hpp"
#include "run/run_session.hpp"
#include "sample/sample_prompts.hpp"

#include <privdiff/config/key_value_error.hpp>

#include <stdexcept>

namespace privdiff::core {

namespace {

// The eval's prompts (its list, then its file), refused at their key when one is no caption.
std::vector<Prompt> eval_prompts_of(const sdk::Config& entry) {
  const std::string file = entry.has("prompt_file") ? entry.get_string("prompt_file") : "";
  try {
    return sample_prompts(entry.get_string_list("prompts"), file, entry.path() + ".prompts");
  } catch (const std::invalid_argument& e) {
    const bool inline_prompt = std::string(e.what()).rfind(entry.path(), 0) == 0;
    throw sdk::KeyValueError(entry.path() + (inline_prompt ? ".prompts" : ".prompt_file"), e.what());
  }
}

}  // namespace

std::vector<PromptMatch> RunOrchestrator::private_eval_prompts(const RunSession& s, const std::vector<Prompt>& prompts) const {
  // A resumed run: against what it recorded when it started (its own data and its ancestry's), as
  // privdiff sample checks a run's prompts; else against what it would record now.
  if (s.options.resume) return private_prompts_of_run(prompts, s.run_dir);
  return private_prompts(prompts, run_record_sets(run_data(s), record_key(), "", s.init ? &*s.init : nullptr),
                         record_key());
}

void RunOrchestrator::check_eval_prompts(RunSession& s) const {
  s.eval_prompts.assign(recipe_.evals.size(), {});
  s.eval_prompt_caveats.assign(recipe_.evals.size(), "");
  const DataSection* real = eval_data();
  const std::int64_t real_classes = real && s.datasets.count(real->name) ? s.datasets.at(real->name)->num_classes() : 0;
  for (std::size_t e = 0; e < recipe_.evals.size(); ++e) {
    const sdk::Config& entry = recipe_.evals[e].settings;
    auto refuse_at = [&](const std::string& key, const std::string& why) { throw sdk::KeyValueError(entry.path() + key, why); };
    const std::vector<Prompt> prompts = eval_prompts_of(entry);
    const auto count = static_cast<std::int64_t>(prompts.size());
    const bool by_prompt = entry.get_string("labels") == "prompts";
    if (prompts.empty()) {
      if (by_prompt) refuse_at(".labels", "\"prompts\" labels each sample by its prompt: set prompts");
      continue;
    }
    if (!components_.model || !components_.model->conditions_on_text()) {
      refuse_at(".prompts", "the model (" + (recipe_.model ? recipe_.model->id : std::string("none")) +
                                ") does not condition on text: prompts are for a text-conditioned model");
    }
    if (by_prompt && real_classes > 0 && count > real_classes) {
      refuse_at(".prompts", std::to_string(count) + " prompts label their samples 0 .. " + std::to_string(count - 1) +
                                " (labels = \"prompts\"), but " + real->name + " has " + std::to_string(real_classes) +
                                " classes: prompt k names class k");
    }
    const std::vector<PromptMatch> matches = private_eval_prompts(s, prompts);
    const std::string opt_in = entry.path() + ".allow_private_prompts";
    if (!matches.empty() && !entry.get_bool("allow_private_prompts")) refuse_at(".prompts", prompt_refusal(matches, opt_in + " = true"));
    if (!matches.empty()) {
      s.eval_prompt_caveats[e] = private_prompt_caveat(matches, opt_in);
      s.data_caveats.push_back("eval-" + std::to_string(e) + ".json: " + s.eval_prompt_caveats[e]);
    }
    for (const Prompt& p : prompts) s.eval_prompts[e].push_back(p.text);
  }
}

}  // namespace privdiff::core
