// privdiff's port of diffusers' UNet2DConditionModel (Stable Diffusion's UNet) against diffusers itself:
// tiny random models in SD 1.x's and SD 2.x's layouts saved by diffusers 0.42.1
// (scripts/make_weights_fixtures.sh) load by name, every tensor used, and give diffusers' output for
// random encoder_hidden_states within 1e-5 relative; its per-example gradients are the micro-batch
// oracle's; config.json options the port lacks are refused by name.
#include <privdiff/diffusion/diffusers_unet.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>

#include "../engine/oracle_networks.hpp"
#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace privdiff::sdk::diffusion {
namespace {

namespace fs = std::filesystem;
const fs::path fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "diffusers";

using privdiff::testing::relative_error;

class DiffusersUNet2DConditionFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(DiffusersUNet2DConditionFixture, GivesDiffusersOutput) {
  const fs::path folder = fixtures / GetParam();
  const auto config = diffusers_unet2d_config(read_file(folder / "config.json"), (folder / "config.json").string());
  ASSERT_TRUE(config.conditional());
  DiffusersUNet2D model(config);
  load_pretrained_weights(folder / "diffusion_pytorch_model.safetensors", model);  // every tensor, by name and shape
  EXPECT_EQ(model.named_parameters().size(), SafetensorsFile(folder / "diffusion_pytorch_model.safetensors").entries().size());
  const SafetensorsFile reference(folder / "reference.safetensors");
  const at::Tensor labels = reference.find("class_labels") ? reference.tensor("class_labels") : at::Tensor();
  at::NoGradGuard no_grad;
  const at::Tensor output = model.forward(reference.tensor("sample"), reference.tensor("timestep"), labels,
                                          reference.tensor("encoder_hidden_states"));
  const at::Tensor expected = reference.tensor("output");
  ASSERT_EQ(output.sizes(), expected.sizes());
  EXPECT_LT(relative_error(output, expected), 1e-5) << GetParam();
  // The text matters: other hidden states, another output.
  const at::Tensor other = model.forward(reference.tensor("sample"), reference.tensor("timestep"), labels,
                                         -reference.tensor("encoder_hidden_states"));  // (a permutation of the tokens would not: no positions)
  EXPECT_GT(relative_error(other, expected), 1e-3) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DiffusersUNet2DConditionFixture,
                         ::testing::Values("unet2d_condition_sd1", "unet2d_condition_sd2"));

const std::string tiny = R"({"_class_name": "UNet2DConditionModel", "in_channels": 2, "out_channels": 2,
    "block_out_channels": [4, 8], "norm_num_groups": 2, "layers_per_block": 1, "cross_attention_dim": 6,
    "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"], "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"])";

// Every parameter's per-example gradient, the transformers' cross-attention to the context included,
// equals one example at a time through autograd (float64), in both projection layouts.
TEST(DiffusersUNet2DCondition, PerExampleGradientsEqualTheOracle) {
  using namespace privdiff::testing::oracle;
  for (const std::string layout : {R"(, "attention_head_dim": 2)", R"(, "use_linear_projection": true, "attention_head_dim": [2, 4])"}) {
    at::manual_seed(5);
    Net net;
    auto unet = net.register_module("unet", std::make_shared<DiffusersUNet2D>(diffusers_unet2d_config(tiny + layout + "}", "c.json")));
    const std::int64_t pixels = 2 * 4 * 4, tokens = 3, width = 6;
    // One input row: the sample, then the context; the timestep fixed.
    net.body = [unet, pixels, tokens, width](const at::Tensor& x) {
      const at::Tensor sample = x.narrow(1, 0, pixels).reshape({-1, 2, 4, 4});
      const at::Tensor context = x.narrow(1, pixels, tokens * width).reshape({-1, tokens, width});
      return unet->forward(sample, at::full({x.size(0)}, 37.0, x.options()), {}, context);
    };
    expect_matches_oracle(net, at::randn({3, pixels + tokens * width}, at::TensorOptions(at::kDouble)));
    EXPECT_TRUE(engine::has_closed_form(net)) << layout;
  }
}

TEST(DiffusersUNet2DCondition, RefusesOptionsThePortLacksByName) {
  const auto c = diffusers_unet2d_config(tiny + R"(, "attention_head_dim": 2})", "c.json");
  EXPECT_EQ(c.attention, (std::vector<bool>{true, false}));
  EXPECT_EQ(c.level_heads, (std::vector<std::int64_t>{2, 2}));  // diffusers reads attention_head_dim as heads
  EXPECT_EQ(c.cross_attention_dim, 6);
  // SD 1.x's defaults: 8 heads at every level, cross-attention 1280 wide
  const auto sd = diffusers_unet2d_config(R"({"_class_name": "UNet2DConditionModel"})", "c.json");
  EXPECT_EQ(sd.level_heads, (std::vector<std::int64_t>{8, 8, 8, 8}));
  EXPECT_EQ(sd.cross_attention_dim, 1280);
  EXPECT_EQ(sd.attention, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(sd.block_out_channels, (std::vector<std::int64_t>{320, 640, 1280, 1280}));
  auto refusal = [&](const std::string& extra) {
    try {
      diffusers_unet2d_config(tiny + (extra.find("attention_head_dim") == std::string::npos ? R"(, "attention_head_dim": 2)" : "") +
                                  extra + "}", "c.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal(""), "");
  EXPECT_NE(refusal(R"(, "addition_embed_type": "text_time")").find("c.json: addition_embed_type = \"text_time\" is not "
                                                                    "supported by privdiff's UNet2DConditionModel"),
            std::string::npos);  // SDXL's extra embeddings
  EXPECT_NE(refusal(R"(, "only_cross_attention": true)").find("only_cross_attention"), std::string::npos);
  EXPECT_NE(refusal(R"(, "num_attention_heads": 4)").find("num_attention_heads"), std::string::npos);
  EXPECT_NE(refusal(R"(, "attention_head_dim": [2])").find("attention_head_dim has 1 values for 2 levels"), std::string::npos);
  EXPECT_NE(refusal(R"(, "attention_head_dim": 3)").find("block_out_channels[0] = 4: is not divisible by its level's "
                                                          "attention_head_dim = 3"), std::string::npos);
  EXPECT_NE(refusal(R"(, "cross_attention_dim": [6, 6])").find("one width for every level"), std::string::npos);
  EXPECT_NE(refusal(R"(, "transformer_layers_per_block": 0)").find("transformer_layers_per_block = 0: must be >= 1"),
            std::string::npos);
  EXPECT_NE(refusal(R"(, "down_block_types": ["AttnDownBlock2D", "DownBlock2D"])").find("AttnDownBlock2D is not supported "
                                                                                        "(DownBlock2D, CrossAttnDownBlock2D)"),
            std::string::npos);
  EXPECT_NE(refusal(R"(, "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"])").find("mirror"), std::string::npos);
  EXPECT_NE(refusal(R"(, "mid_block_type": "UNetMidBlock2D")").find("mid_block_type"), std::string::npos);
  DiffusersUNet2D model(c);
  EXPECT_THROW(model.forward(at::randn({1, 2, 4, 4}), at::full({1}, 3.0)), std::invalid_argument);  // no hidden states
}

}  // namespace
}  // namespace privdiff::sdk::diffusion
