// A Stable Diffusion pipeline in diffusers' layout (tests/fixtures/weights/diffusers/sd_tiny, saved by
// diffusers 0.42.1 and transformers 5.25.0: scripts/make_weights_fixtures.sh) through privdiff's own
// parts, as StableDiffusionPipeline runs them: its tokenizer/merges.txt gives the ids CLIPTokenizer gave
// the prompts, its text_encoder/ (CLIPTextModel) the same hidden states, and its unet/
// (UNet2DConditionModel) the same noise prediction from them, each within 1e-5 relative.
#include <privdiff/diffusion/diffusers_unet.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/text/clip_tokenizer.hpp>
#include <privdiff/text_encoders/clip_text_model.hpp>

#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace privdiff::sdk {
namespace {

namespace fs = std::filesystem;
const fs::path pipeline = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "diffusers" / "sd_tiny";

TEST(StableDiffusionPipeline, PromptsGiveDiffusersNoisePrediction) {
  const SafetensorsFile reference(pipeline / "reference.safetensors");
  const auto tokenizer = ClipTokenizer::from_file(pipeline / "tokenizer" / "merges.txt");
  std::ifstream prompts(pipeline / "prompts.txt");
  std::vector<std::int64_t> ids;
  std::int64_t rows = 0;
  for (std::string line; std::getline(prompts, line); ++rows) {
    const auto padded = tokenizer.padded(line);
    ids.insert(ids.end(), padded.ids.begin(), padded.ids.end());
  }
  const at::Tensor ours = at::tensor(ids, at::kLong).view({rows, 77});
  ASSERT_TRUE(ours.equal(reference.tensor("ids").to(at::kLong)));

  text_encoders::ClipTextModel encoder(
      text_encoders::clip_text_config(read_file(pipeline / "text_encoder" / "config.json"), "text_encoder/config.json"));
  load_pretrained_weights(pipeline / "text_encoder" / "model.safetensors", encoder);  // transformers 5: no text_model. prefix
  const fs::path unet_dir = pipeline / "unet";
  diffusion::DiffusersUNet2D unet(diffusion::diffusers_unet2d_config(read_file(unet_dir / "config.json"), "unet/config.json"));
  load_pretrained_weights(unet_dir / "diffusion_pytorch_model.safetensors", unet);
  at::NoGradGuard no_grad;
  const at::Tensor hidden = encoder.forward(ours).last_hidden_state;  // SD passes no mask
  EXPECT_LT(privdiff::testing::relative_error(hidden, reference.tensor("hidden")), 1e-5);
  const at::Tensor eps = unet.forward(reference.tensor("latents"), reference.tensor("timestep"), {}, hidden);
  EXPECT_LT(privdiff::testing::relative_error(eps, reference.tensor("eps")), 1e-5);
}

}  // namespace
}  // namespace privdiff::sdk
