// privdiff's ports of diffusers' UNet2DModel and AutoencoderKL against diffusers itself: tiny random
// models saved by diffusers 0.42.1 (scripts/make_weights_fixtures.sh) load by name, every tensor used,
// and give diffusers' outputs within 1e-5 relative; config.json options the ports lack are refused by name.
#include <privdiff/diffusion/diffusers_autoencoder.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/diffusers_unet.hpp>
#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>

#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>

namespace privdiff::sdk::diffusion {
namespace {

namespace fs = std::filesystem;
const fs::path fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "diffusers";

// Copies every tensor of `file` into the module's parameter or buffer of that name; all must match.
void load_by_name(torch::nn::Module& module, const SafetensorsFile& file) {
  std::map<std::string, at::Tensor> targets;
  for (auto& p : module.named_parameters(true)) targets.emplace(p.key(), p.value());
  for (auto& b : module.named_buffers(true)) targets.emplace(b.key(), b.value());
  ASSERT_EQ(targets.size(), file.entries().size());
  at::NoGradGuard no_grad;
  for (const auto& e : file.entries()) {
    ASSERT_TRUE(targets.count(e.name)) << "privdiff's port has no '" << e.name << "'";
    const at::Tensor source = file.tensor(e.name);
    ASSERT_EQ(targets[e.name].sizes(), source.sizes()) << e.name;
    targets[e.name].copy_(source);
  }
}

using privdiff::testing::relative_error;

class DiffusersUNet2DFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(DiffusersUNet2DFixture, GivesDiffusersOutput) {
  const fs::path folder = fixtures / GetParam();
  const auto config = diffusers_unet2d_config(read_file(folder / "config.json"), (folder / "config.json").string());
  DiffusersUNet2D model(config);
  load_by_name(model, SafetensorsFile(folder / "diffusion_pytorch_model.safetensors"));
  const SafetensorsFile reference(folder / "reference.safetensors");
  const at::Tensor labels = reference.find("class_labels") ? reference.tensor("class_labels") : at::Tensor();
  at::NoGradGuard no_grad;
  const at::Tensor output = model.forward(reference.tensor("sample"), reference.tensor("timestep"), labels);
  const at::Tensor expected = reference.tensor("output");
  ASSERT_EQ(output.sizes(), expected.sizes());
  EXPECT_LT(relative_error(output, expected), 1e-5) << GetParam();
}

// The "discrete" objective is diffusers' DDPM training: the scheduler's noise levels, and at
// x_t = scheduler.add_noise(x0, noise, t) the denoiser D(x_t / sqrt(abar_t); sigma_t) is the x0
// estimate diffusers' epsilon-prediction gives.
TEST_P(DiffusersUNet2DFixture, DiscreteObjectiveIsDiffusersDdpm) {
  const fs::path folder = fixtures / GetParam();
  const auto scheduler = nlohmann::json::parse(read_file(folder / "scheduler" / "scheduler_config.json"));
  const std::vector<double> ours = ddpm_alphas_cumprod(scheduler["beta_schedule"], scheduler["beta_start"],
                                                       scheduler["beta_end"], scheduler["num_train_timesteps"]);
  const SafetensorsFile reference(folder / "reference.safetensors");
  const at::Tensor theirs = reference.tensor("alphas_cumprod").to(at::kDouble);  // float32, as diffusers computes it
  ASSERT_EQ(theirs.numel(), static_cast<std::int64_t>(ours.size()));
  EXPECT_LT(((at::tensor(ours, at::TensorOptions(at::kDouble)) - theirs).abs() / theirs).max().item<double>(), 1e-4);
  // The mapping itself, on diffusers' own levels.
  std::vector<double> levels(theirs.data_ptr<double>(), theirs.data_ptr<double>() + theirs.numel());
  const Preconditioning objective = Preconditioning::discrete(levels);
  DiffusersUNet2D model(diffusers_unet2d_config(read_file(folder / "config.json"), "config.json"));
  load_by_name(model, SafetensorsFile(folder / "diffusion_pytorch_model.safetensors"));
  const at::Tensor labels = reference.find("class_labels") ? reference.tensor("class_labels") : at::Tensor();
  const Network network = [&](const at::Tensor& x, const at::Tensor& t, const at::Tensor& y) { return model.forward(x, t, y); };
  const at::Tensor sigma = at::tensor(objective.discrete_sigmas(), at::TensorOptions(at::kDouble))
                               .index_select(0, reference.tensor("ddpm_t"))
                               .to(at::kFloat);
  const at::Tensor x = reference.tensor("ddpm_x0") + sigma.reshape({-1, 1, 1, 1}) * reference.tensor("ddpm_noise");
  at::NoGradGuard no_grad;
  const at::Tensor denoised = denoise(network, objective, x, sigma, labels);
  EXPECT_LT(relative_error(denoised, reference.tensor("ddpm_x0_pred")), 1e-5) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DiffusersUNet2DFixture, ::testing::Values("unet2d_classes", "unet2d_two_attention"));

TEST(DiffusersUNet2D, RefusesOptionsThePortLacksByName) {
  const std::string base = R"({"_class_name": "UNet2DModel", "block_out_channels": [8, 16], "norm_num_groups": 4,
      "down_block_types": ["DownBlock2D", "AttnDownBlock2D"], "up_block_types": ["AttnUpBlock2D", "UpBlock2D"])";
  EXPECT_EQ(diffusers_unet2d_config(base + "}", "c.json").attention, (std::vector<bool>{false, true}));
  auto refusal = [&](const std::string& extra) {
    try {
      diffusers_unet2d_config(base + extra + "}", "c.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal(R"(, "resnet_time_scale_shift": "scale_shift")").find("c.json: resnet_time_scale_shift = \"scale_shift\" is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(R"(, "time_embedding_type": "fourier")").find("time_embedding_type"), std::string::npos);
  EXPECT_NE(refusal(R"(, "class_embed_type": "timestep")").find("class_embed_type"), std::string::npos);
  EXPECT_NE(refusal(R"(, "down_block_types": ["DownBlock2D", "SkipDownBlock2D"])").find("SkipDownBlock2D is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(R"(, "up_block_types": ["UpBlock2D", "UpBlock2D"])").find("mirror"), std::string::npos);
  EXPECT_THROW(diffusers_unet2d_config(R"({"_class_name": "AutoencoderKL"})", "c.json"), std::invalid_argument);
  // Sizes the port divides by or builds from, and options it would silently not apply (issue 52: a zero
  // head size ended in SIGFPE; dropout and a missing middle block passed without a word).
  EXPECT_EQ(refusal(R"(, "attention_head_dim": 0)"),
            "c.json: attention_head_dim = 0: must be >= 1 (channels per attention head)");
  EXPECT_NE(refusal(R"(, "attention_head_dim": 3)").find("block_out_channels[1] = 16: is not divisible by "
                                                          "attention_head_dim = 3"), std::string::npos);
  EXPECT_NE(refusal(R"(, "norm_num_groups": 0)").find("norm_num_groups = 0: must be >= 1"), std::string::npos);
  EXPECT_NE(refusal(R"(, "norm_num_groups": 32)").find("block_out_channels[0] = 8: is not divisible by norm_num_groups = 32"),
            std::string::npos);
  EXPECT_NE(refusal(R"(, "layers_per_block": 0)").find("layers_per_block = 0: must be >= 1"), std::string::npos);
  EXPECT_NE(refusal(R"(, "dropout": 0.1)").find("c.json: dropout = 0.1 is not supported"), std::string::npos);
  EXPECT_EQ(refusal(R"(, "dropout": 0.0)"), "");
  EXPECT_NE(refusal(R"(, "mid_block_type": null)").find("mid_block_type = null (no middle block) is not supported"),
            std::string::npos);
  EXPECT_THROW(diffusers_unet2d_config(R"({"_class_name": "UNet2DModel", "block_out_channels": [],
      "down_block_types": [], "up_block_types": []})", "c.json"), std::invalid_argument);
}

// attention_head_dim null: diffusers' UNet2DModel passes each block's own width as the head dimension,
// so every attention block has one head (issue 52: privdiff kept its default of 8 channels a head).
TEST(DiffusersUNet2D, NullHeadDimensionMeansOneHeadPerBlock) {
  const std::string base = R"({"_class_name": "UNet2DModel", "block_out_channels": [8, 16], "norm_num_groups": 4,
      "down_block_types": ["DownBlock2D", "AttnDownBlock2D"], "up_block_types": ["AttnUpBlock2D", "UpBlock2D"], )";
  const auto null_dim = diffusers_unet2d_config(base + R"("attention_head_dim": null})", "c.json");
  EXPECT_TRUE(null_dim.one_head_per_block);
  EXPECT_EQ(null_dim.heads(16), 1);
  auto output = [&](const DiffusersUNet2DConfig& config) {
    at::manual_seed(3);
    DiffusersUNet2D model(config);
    at::NoGradGuard no_grad;
    return model.forward(at::randn({2, 3, 8, 8}), at::full({2}, 10.0));
  };
  const at::Tensor one_head = output(null_dim);
  EXPECT_TRUE(at::equal(one_head, output(diffusers_unet2d_config(base + R"("attention_head_dim": 16})", "c.json"))));
  EXPECT_FALSE(at::allclose(one_head, output(diffusers_unet2d_config(base + R"("attention_head_dim": 8})", "c.json"))));
}

class DiffusersAutoencoderKLFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(DiffusersAutoencoderKLFixture, GivesDiffusersMomentsAndDecodings) {
  const fs::path folder = fixtures / GetParam();
  DiffusersAutoencoderKL model(
      diffusers_autoencoder_kl_config(read_file(folder / "config.json"), (folder / "config.json").string()));
  load_by_name(model, SafetensorsFile(folder / "diffusion_pytorch_model.safetensors"));
  const SafetensorsFile reference(folder / "reference.safetensors");
  at::NoGradGuard no_grad;
  const auto [mean, logvar] = model.encode(reference.tensor("images"));
  EXPECT_LT(relative_error(mean, reference.tensor("mean")), 1e-5) << GetParam();
  EXPECT_LT(relative_error(logvar, reference.tensor("logvar")), 1e-5) << GetParam();
  EXPECT_LT(relative_error(model.decode(reference.tensor("latents")), reference.tensor("decoded")), 1e-5) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DiffusersAutoencoderKLFixture,
                         ::testing::Values("autoencoder_kl_small", "autoencoder_kl_three_levels"));

TEST(DiffusersAutoencoderKL, RefusesOptionsThePortLacksByName) {
  auto refusal = [](const std::string& json) {
    try {
      diffusers_autoencoder_kl_config(json, "vae.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal(R"({"_class_name": "AutoencoderKL", "block_out_channels": [8, 16]})"), "");
  EXPECT_NE(refusal(R"({"_class_name": "AutoencoderKL", "act_fn": "gelu"})").find("vae.json: act_fn = \"gelu\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"_class_name": "AutoencoderKL", "block_out_channels": [8],
                        "down_block_types": ["DownBlock2D"], "up_block_types": ["UpDecoderBlock2D"]})").find("not supported"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"_class_name": "UNet2DModel"})").find("not AutoencoderKL"), std::string::npos);
}

}  // namespace
}  // namespace privdiff::sdk::diffusion
