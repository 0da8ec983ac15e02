// privdiff's port of transformers' CLIPModel against transformers 5.25.0 itself: a tiny random CLIPModel
// (tests/fixtures/weights/clip/clip_tiny, scripts/make_weights_fixtures.sh) loads by name, every tensor
// used; its normalised image and text embeddings (CLIPModel's image_embeds, text_embeds) are
// transformers' within 1e-5, the text through privdiff's tokenizer; clip_pixel_values prepares 8-bit
// images as CLIPImageProcessor does up to a resampling error; configs it cannot run are refused by key.
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/text/clip_tokenizer.hpp>
#include <privdiff/text_encoders/clip_model.hpp>

#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

namespace privdiff::sdk::text_encoders {
namespace {

namespace fs = std::filesystem;
const fs::path folder = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "clip" / "clip_tiny";

ClipModel fixture_model() {
  ClipModel model(clip_model_config(read_file(folder / "config.json"), "config.json"));
  load_pretrained_weights(folder / "model.safetensors", model);  // every tensor by name, none left over
  model.eval();
  return model;
}

TEST(ClipModel, EmbeddingsAreTransformersOwn) {
  ClipModel model = fixture_model();
  const SafetensorsFile reference(folder / "reference.safetensors");
  const auto tokenizer = ClipTokenizer::from_file(folder / "merges.txt");
  std::ifstream in(folder / "prompts.txt");
  std::vector<std::int64_t> ids;
  std::int64_t rows = 0;
  for (std::string line; std::getline(in, line); ++rows) {
    const auto padded = tokenizer.padded(line);
    ids.insert(ids.end(), padded.ids.begin(), padded.ids.end());
  }
  const at::Tensor ours = at::tensor(ids, at::kLong).view({rows, 77});
  ASSERT_TRUE(ours.equal(reference.tensor("ids").to(at::kLong)));
  at::NoGradGuard no_grad;
  EXPECT_LT(privdiff::testing::relative_error(model.image_embeds(reference.tensor("pixel_values")), reference.tensor("image_embeds")),
            1e-5);
  EXPECT_LT(privdiff::testing::relative_error(model.text_embeds(ours), reference.tensor("text_embeds")), 1e-5);
}

TEST(ClipModel, PixelValuesAreTheImageProcessorsUpToResampling) {
  const SafetensorsFile reference(folder / "reference.safetensors");
  const at::Tensor ours = clip_pixel_values(reference.tensor("images"), 16);
  const at::Tensor theirs = reference.tensor("processed");
  ASSERT_EQ(ours.sizes(), theirs.sizes());
  // PIL's bicubic on 8-bit pixels against ATen's antialiased bicubic on floats: the same filter, rounded
  // differently (PIL rounds its two passes to 8 bits). In CLIP's normalised units, where one 8-bit level
  // is about 0.015; measured on random-noise images (the worst case for resampling): mean 0.005, max 0.13.
  const double worst = (ours - theirs).abs().max().item<double>(), mean = (ours - theirs).abs().mean().item<double>();
  std::cout << "clip_pixel_values against CLIPImageProcessor: max " << worst << ", mean " << mean << "\n";
  EXPECT_LT(mean, 0.02);
  EXPECT_LT(worst, 0.2);
  // Grey images are repeated to three channels.
  EXPECT_EQ(clip_pixel_values(at::zeros({2, 1, 8, 8}), 16).sizes(), (std::vector<std::int64_t>{2, 3, 16, 16}));
}

TEST(ClipModel, RefusesWhatThePortCannotRunByKey) {
  auto refusal = [](const std::string& json) {
    try {
      clip_model_config(json, "config.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string text = R"("text_config": {"hidden_size": 32, "num_attention_heads": 4})";
  EXPECT_EQ(refusal(R"({"model_type": "clip", )" + text + R"(, "vision_config": {"hidden_size": 24, "num_attention_heads": 3, "image_size": 16, "patch_size": 4}})"),
            "(accepted)");
  EXPECT_NE(refusal(R"({"model_type": "clip_text_model"})").find("not a CLIPModel's config.json"), std::string::npos);
  EXPECT_EQ(refusal(R"({"model_type": "clip", )" + text + R"(, "vision_config": {"image_size": 16, "patch_size": 5}})"),
            "config.json vision_config: patch_size = 5 does not divide image_size = 16");
  EXPECT_EQ(refusal(R"({"model_type": "clip", )" + text + "}"), "config.json: no vision_config");
  ClipModel model = fixture_model();
  EXPECT_THROW(model.image_embeds(at::zeros({1, 3, 8, 8})), std::invalid_argument);
}

}  // namespace
}  // namespace privdiff::sdk::text_encoders
