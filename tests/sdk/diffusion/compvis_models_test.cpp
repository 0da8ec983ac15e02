// privdiff's ports of CompVis's latent diffusion networks against CompVis's own code: tiny random
// LatentDiffusion checkpoints (UNetModel, KL autoencoder, class embedder) built by
// github.com/CompVis/latent-diffusion at the commit DP-LDM forks, converted by
// scripts/convert_to_safetensors.py --ldm-config (scripts/make_weights_fixtures.sh). The config is
// read from the metadata, every tensor of each network loads by name, and the outputs are
// CompVis's within 1e-5 relative.
#include <privdiff/diffusion/compvis_ldm.hpp>
#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/io/safetensors.hpp>

#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace privdiff::sdk::diffusion {
namespace {

namespace fs = std::filesystem;
const fs::path fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "compvis";

// Copies every tensor under `prefix` into the module's parameter of that name (CompVis's 1x1 Conv1d
// weights [C', C, 1] into Linear weights [C', C]); every parameter must be filled.
void load_prefix(torch::nn::Module& module, const SafetensorsFile& file, const std::string& prefix) {
  std::map<std::string, at::Tensor> targets;
  for (auto& p : module.named_parameters(true)) targets.emplace(p.key(), p.value());
  std::size_t loaded = 0;
  at::NoGradGuard no_grad;
  for (const auto& e : file.entries()) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    const std::string name = e.name.substr(prefix.size());
    ASSERT_TRUE(targets.count(name)) << "privdiff's port has no '" << name << "'";
    ASSERT_EQ(targets[name].numel(), static_cast<std::int64_t>(e.numel())) << name;
    targets[name].copy_(file.tensor(e.name).reshape(targets[name].sizes()));
    ++loaded;
  }
  EXPECT_EQ(loaded, targets.size()) << prefix;
}

using privdiff::testing::relative_error;

class CompVisFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(CompVisFixture, UNetGivesCompVisOutput) {
  const fs::path folder = fixtures / GetParam();
  const SafetensorsFile weights(folder / "model.safetensors");
  const CompVisLdmConfig config = compvis_ldm_config(weights.metadata().at("ldm.config"), "ldm.config");
  CompVisUNet unet(config.unet);
  load_prefix(unet, weights, "model.diffusion_model.");
  const SafetensorsFile reference(folder / "reference.safetensors");
  const at::Tensor context = reference.find("context") ? reference.tensor("context") : at::Tensor();
  at::NoGradGuard no_grad;
  const at::Tensor output = unet.forward(reference.tensor("unet_x"), reference.tensor("unet_t"), context);
  EXPECT_LT(relative_error(output, reference.tensor("unet_output")), 1e-5);
}

TEST_P(CompVisFixture, AutoencoderGivesCompVisMomentsAndDecodings) {
  const fs::path folder = fixtures / GetParam();
  const SafetensorsFile weights(folder / "model.safetensors");
  const CompVisLdmConfig config = compvis_ldm_config(weights.metadata().at("ldm.config"), "ldm.config");
  CompVisAutoencoderKL autoencoder(config.autoencoder);
  load_prefix(autoencoder, weights, "first_stage_model.");
  const SafetensorsFile reference(folder / "reference.safetensors");
  at::NoGradGuard no_grad;
  const auto [mean, logvar] = autoencoder.encode(reference.tensor("images"));
  EXPECT_LT(relative_error(mean, reference.tensor("mean")), 1e-5);
  EXPECT_LT(relative_error(logvar, reference.tensor("logvar")), 1e-5);
  EXPECT_LT(relative_error(autoencoder.decode(reference.tensor("latents")), reference.tensor("decoded")), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CompVisFixture, ::testing::Values("ldm_dpldm", "ldm_unconditional"));

TEST(CompVisLdmConfig, ReadsTheClassEmbedderAndSchedule) {
  const SafetensorsFile weights(fixtures / "ldm_dpldm" / "model.safetensors");
  const CompVisLdmConfig c = compvis_ldm_config(weights.metadata().at("ldm.config"), "ldm.config");
  EXPECT_EQ(c.classes, 4);
  EXPECT_EQ(c.unet.context_dim, 5);
  EXPECT_TRUE(c.unet.use_spatial_transformer && c.unet.use_scale_shift_norm && c.unet.resblock_updown);
  EXPECT_DOUBLE_EQ(c.linear_start, 0.0015);
  EXPECT_DOUBLE_EQ(c.scale_factor, 0.7);
  EXPECT_EQ(c.autoencoder.attn_resolutions, (std::vector<std::int64_t>{8}));
  // The schedule LDM registers (its make_beta_schedule, in the checkpoint as a float32 buffer).
  const at::Tensor stored = weights.tensor("alphas_cumprod").to(at::kDouble);
  const at::Tensor ours = at::tensor(compvis_alphas_cumprod(c), at::TensorOptions(at::kDouble));
  ASSERT_EQ(stored.numel(), ours.numel());
  EXPECT_LT(((ours - stored).abs() / stored).max().item<double>(), 1e-5);
}

TEST(CompVisLdmConfig, RefusesWhatThePortsLackByPath) {
  const std::string unet = R"("unet_config": {"target": "ldm.modules.diffusionmodules.openaimodel.UNetModel",
      "params": {"in_channels": 3, "out_channels": 3, "model_channels": 32, "num_res_blocks": 1,
                 "attention_resolutions": [1], "num_heads": 2)";
  const std::string first = R"("first_stage_config": {"target": "ldm.models.autoencoder.AutoencoderKL",
      "params": {"embed_dim": 3, "ddconfig": {"z_channels": 3, "resolution": 8, "in_channels": 3, "out_ch": 3,
                 "ch": 32, "ch_mult": [1], "num_res_blocks": 1)";
  auto refusal = [&](const std::string& unet_extra, const std::string& first_extra, const std::string& top) {
    try {
      compvis_ldm_config("{" + unet + unet_extra + "}}, " + first + first_extra + "}}}" + top + "}", "c.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal("", "", ""), "");
  EXPECT_NE(refusal(R"(, "use_new_attention_order": true)", "", "").find("c.json: unet_config.params.use_new_attention_order"),
            std::string::npos);
  EXPECT_NE(refusal("", R"(, "attn_type": "linear")", "").find("first_stage_config.params.ddconfig.attn_type"),
            std::string::npos);
  EXPECT_NE(refusal("", "", R"(, "parameterization": "x0")").find("parameterization = \"x0\" is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace privdiff::sdk::diffusion
