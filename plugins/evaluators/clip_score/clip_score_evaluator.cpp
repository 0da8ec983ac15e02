// clip_score: how well prompt-conditioned samples match their prompts, by a CLIP model the user supplies
// (a transformers CLIPModel folder: config.json, model.safetensors, and its tokenizer's merges.txt), as
// text-to-image papers report it: torchmetrics' CLIP score, 100 x max(cos(image, prompt), 0) averaged
// over the samples; and how often CLIP picks a sample's own prompt among the set's distinct prompts.
#include <privdiff/components/evaluator.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text/clip_tokenizer.hpp>
#include <privdiff/text_encoders/clip_model.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>

namespace privdiff::plugins::clip_score {

using namespace privdiff::sdk;
namespace fs = std::filesystem;
using text_encoders::ClipModel;

namespace {

std::shared_ptr<ClipModel> clip_of(const Config& c) {
  const std::string at = c.path() + ".weights";
  const fs::path dir = c.get_string("weights");
  if (dir.empty()) throw KeyValueError(at, "a CLIP model is needed: a transformers CLIPModel folder (config.json, model.safetensors)");
  if (!fs::is_regular_file(dir / "config.json") || !fs::is_regular_file(dir / "model.safetensors")) {
    throw KeyValueError(at, dir.string() + " is not a transformers model folder (config.json and model.safetensors)");
  }
  try {
    auto model = std::make_shared<ClipModel>(text_encoders::clip_model_config(read_file(dir / "config.json"), (dir / "config.json").string()));
    load_pretrained_weights(dir / "model.safetensors", *model);
    model->eval();
    for (auto& p : model->parameters()) p.set_requires_grad(false);
    return model;
  } catch (const std::exception& e) {
    throw KeyValueError(at, e.what());
  }
}

ClipTokenizer tokenizer_of(const Config& c, const ClipModel& model) {
  const fs::path given = c.get_string("tokenizer").empty() ? fs::path(c.get_string("weights")) : fs::path(c.get_string("tokenizer"));
  const fs::path merges = fs::is_directory(given) ? given / "merges.txt" : given;
  const std::string at = c.path() + (c.get_string("tokenizer").empty() ? ".weights" : ".tokenizer");
  const auto& t = model.config().text;
  std::optional<ClipTokenizer> tokenizer;
  try {
    tokenizer = ClipTokenizer::from_file(merges, static_cast<std::size_t>(std::min<std::int64_t>(77, t.max_position_embeddings)));
  } catch (const std::exception& e) {
    throw KeyValueError(at, e.what());
  }
  if (static_cast<std::int64_t>(tokenizer->vocabulary_size()) != t.vocab_size) {
    throw KeyValueError(at, merges.string() + ": " + std::to_string(tokenizer->vocabulary_size()) + " tokens, but the CLIP text "
                            "model has " + std::to_string(t.vocab_size));
  }
  return std::move(*tokenizer);
}

class ClipScoreEvaluator : public Evaluator {
 public:
  explicit ClipScoreEvaluator(const Config& c)
      : model_(clip_of(c)), tokenizer_(tokenizer_of(c, *model_)), batch_(c.get_int("batch_size")),
        weights_(c.get_string("weights")) {}

  std::vector<std::string> metric_names() const override { return {"clip_score", "prompt_accuracy"}; }

  EvaluationResult evaluate(const EvaluationInput& in) override {
    const LabelledImages& s = in.samples;
    std::vector<std::int64_t> scored;  // the samples with a prompt
    for (std::size_t i = 0; i < s.prompts.size(); ++i) {
      if (!s.prompts[i].empty()) scored.push_back(static_cast<std::int64_t>(i));
    }
    if (scored.empty()) {
      throw std::invalid_argument("clip_score scores samples against their prompts, and these have none: sample from prompts "
                                  "([[eval]] prompts, or privdiff sample --prompts; privdiff eval reads the -prompts.txt "
                                  "written beside the images)");
    }
    model_->to(in.device);
    const at::Tensor text = prompt_embeddings(s.prompts, in.device);  // [P, d] of the distinct prompts
    const at::Tensor index = at::tensor(scored, at::kLong);
    std::vector<at::Tensor> cosines, chosen;
    torch::NoGradGuard no_grad;
    for (std::int64_t b = 0; b < index.numel(); b += batch_) {
      const at::Tensor rows = index.narrow(0, b, std::min<std::int64_t>(batch_, index.numel() - b));
      const at::Tensor images = text_encoders::clip_pixel_values(s.images.index_select(0, rows), model_->config().vision.image_size);
      const at::Tensor all = at::matmul(model_->image_embeds(images.to(in.device)), text.t()).to(at::kCPU);  // [B, P]
      const at::Tensor own = own_prompt(s.prompts, rows);
      cosines.push_back(all.gather(1, own.unsqueeze(1)).squeeze(1));
      chosen.push_back((all.argmax(1) == own).to(at::kDouble));
      *in.log << "  clip_score: " << std::min<std::int64_t>(b + batch_, index.numel()) << "/" << index.numel() << "\r" << std::flush;
    }
    *in.log << "\n";
    const at::Tensor score = 100.0 * at::cat(cosines).to(at::kDouble).clamp_min(0);
    EvaluationResult result;
    result.metrics = {{"clip_score", score.mean().item<double>()}, {"prompt_accuracy", at::cat(chosen).mean().item<double>()}};
    const at::Tensor cosine = at::cat(cosines).to(at::kDouble);
    result.details = {{"clip_score.std", score.numel() > 1 ? score.std().item<double>() : 0.0},
                      {"cosine.mean", cosine.mean().item<double>()},  // before the clamp at 0
                      {"distinct_prompts", static_cast<double>(distinct_.size())}};
    result.provenance = "CLIP (transformers CLIPModel) from " + weights_ + ", images resized to " +
                        std::to_string(model_->config().vision.image_size) + " (bicubic) and normalised as CLIP's image "
                        "processor; clip_score = 100 x max(cos, 0) (torchmetrics'), prompt_accuracy = CLIP names a sample's "
                        "own prompt among the set's " + std::to_string(distinct_.size()) + " distinct prompts";
    result.counts = {{"samples", static_cast<std::int64_t>(scored.size())}};
    return result;
  }

 private:
  // The normalised embeddings of the set's distinct prompts, in first-seen order (distinct_ keeps it).
  at::Tensor prompt_embeddings(const std::vector<std::string>& prompts, c10::Device device) {
    distinct_.clear();
    std::vector<std::int64_t> ids;
    for (const auto& p : prompts) {
      if (p.empty() || distinct_.count(p)) continue;
      distinct_.emplace(p, static_cast<std::int64_t>(distinct_.size()));
      const auto padded = tokenizer_.padded(p);
      ids.insert(ids.end(), padded.ids.begin(), padded.ids.end());
    }
    const auto width = static_cast<std::int64_t>(tokenizer_.context_length());
    torch::NoGradGuard no_grad;
    return model_->text_embeds(at::tensor(ids, at::kLong).view({-1, width}).to(device));
  }
  at::Tensor own_prompt(const std::vector<std::string>& prompts, const at::Tensor& rows) const {
    std::vector<std::int64_t> out;
    for (std::int64_t i = 0; i < rows.numel(); ++i) out.push_back(distinct_.at(prompts.at(static_cast<std::size_t>(rows[i].item<std::int64_t>()))));
    return at::tensor(out, at::kLong);
  }

  std::shared_ptr<ClipModel> model_;
  ClipTokenizer tokenizer_;
  std::int64_t batch_;
  std::string weights_;
  std::map<std::string, std::int64_t> distinct_;
};

void register_components(Registrar* registrar) {
  registrar->add<ClipScoreEvaluator>(
      "clip_score",
      "CLIP score of prompt-conditioned samples (100 x max(cos, 0), torchmetrics') and how often CLIP names each "
      "sample's own prompt, by a CLIP model the user supplies",
      Schema{}
          .add(Key::string("weights").defaults("")
                   .doc("a transformers CLIPModel folder (config.json, model.safetensors), e.g. openai/clip-vit-large-patch14"))
          .add(Key::string("tokenizer").defaults("")
                   .doc("CLIP's merges (a folder with merges.txt, or the file); empty: the weights folder's merges.txt"))
          .add(Key::integer("batch_size").at_least(1).defaults(50).doc("images per forward pass")));
}

}  // namespace

}  // namespace privdiff::plugins::clip_score

PRIVDIFF_PLUGIN("clip_score", "0.1.0", "CLIP score of prompt-conditioned samples", privdiff::plugins::clip_score::register_components)
