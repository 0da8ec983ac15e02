// The clip_score evaluator on the fixture CLIPModel (transformers 5.25.0, tests/fixtures/weights/clip):
// on 8-bit images with prompts, its cosines are those of transformers' CLIPModel on CLIPImageProcessor's
// pixel values up to the resampling of the two image pipelines, and its metrics are their definitions
// (torchmetrics' 100 x max(cos, 0); CLIP naming each sample's own prompt); samples without prompts and a
// missing model are refused.
#include "installed_plugins.hpp"

#include <privdiff/components/evaluator.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/text/clip_tokenizer.hpp>
#include <privdiff/text_encoders/clip_model.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace privdiff;
namespace fs = std::filesystem;

namespace {

const fs::path clip = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "clip" / "clip_tiny";

std::vector<std::string> fixture_prompts() {
  std::ifstream in(clip / "prompts.txt");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

double value(const std::vector<std::pair<std::string, double>>& values, const std::string& name) {
  for (const auto& [n, v] : values) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no " << name;
  return 0;
}

sdk::EvaluationResult score(const sdk::LabelledImages& samples) {
  auto evaluator = privdiff::testing::make_installed<sdk::Evaluator>("clip_score", {{"weights", sdk::ConfigValue{clip.string()}}});
  std::ostringstream log;
  sdk::EvaluationInput input;
  input.samples = samples;
  input.log = &log;
  return evaluator->evaluate(input);
}

}  // namespace

TEST(ClipScoreEvaluator, CosinesAreTransformersOnItsImageProcessorsPixels) {
  const sdk::SafetensorsFile reference(clip / "reference.safetensors");
  const at::Tensor images = reference.tensor("images");
  const auto prompts = fixture_prompts();
  const sdk::EvaluationResult r = score({images, at::zeros({images.size(0)}, at::kLong), prompts});
  const at::Tensor cosines = reference.tensor("image_text_cosines").to(at::kDouble);  // [image, prompt]
  EXPECT_NEAR(value(r.details, "cosine.mean"), cosines.diagonal().mean().item<double>(), 0.01);
  EXPECT_NEAR(value(r.metrics, "clip_score"), reference.tensor("clip_score").item<double>(), 1.0);
  EXPECT_EQ(r.counts.at("samples"), 2);
  // The definitions, on privdiff's own embeddings of the same pixels.
  sdk::text_encoders::ClipModel model(sdk::text_encoders::clip_model_config(sdk::read_file(clip / "config.json"), "config.json"));
  sdk::load_pretrained_weights(clip / "model.safetensors", model);
  const auto tokenizer = sdk::ClipTokenizer::from_file(clip / "merges.txt");
  std::vector<std::int64_t> ids;
  for (const auto& p : prompts) {
    const auto padded = tokenizer.padded(p);
    ids.insert(ids.end(), padded.ids.begin(), padded.ids.end());
  }
  at::NoGradGuard no_grad;
  const at::Tensor ours = at::matmul(model.image_embeds(sdk::text_encoders::clip_pixel_values(images, 16)),
                                     model.text_embeds(at::tensor(ids, at::kLong).view({2, 77})).t()).to(at::kDouble);
  EXPECT_NEAR(value(r.metrics, "clip_score"), (100 * ours.diagonal().clamp_min(0)).mean().item<double>(), 1e-4);
  EXPECT_NEAR(value(r.metrics, "prompt_accuracy"),
              (ours.argmax(1) == at::arange(2, at::kLong)).to(at::kDouble).mean().item<double>(), 1e-12);
  EXPECT_NEAR(value(r.details, "cosine.mean"), ours.diagonal().mean().item<double>(), 1e-5);
}

TEST(ClipScoreEvaluator, RefusesSamplesWithoutPromptsAndAMissingModel) {
  const at::Tensor images = at::zeros({2, 3, 16, 16});
  EXPECT_NE(privdiff::testing::error_of([&] { score({images, at::zeros({2}, at::kLong), {}}); }).find("these have none"),
            std::string::npos);
  EXPECT_NE(privdiff::testing::error_of([&] { score({images, at::zeros({2}, at::kLong), {"", ""}}); }).find("these have none"),
            std::string::npos);
  EXPECT_NE(privdiff::testing::error_of([] { privdiff::testing::make_installed<sdk::Evaluator>("clip_score"); })
                .find("evaluator.weights: a CLIP model is needed"),
            std::string::npos);
}
