// The diffusers_unet model on Stable Diffusion's layout: the fixture StableDiffusionPipeline (diffusers
// 0.42.1, transformers 5.25.0; tests/fixtures/weights/diffusers/sd_tiny) named by its folders, as
// privdiff weights import writes them. The model's denoiser is diffusers' own noise prediction for the
// prompts (through the pipeline's tokenizer, frozen text encoder and UNet2DConditionModel); a diffusers
// export folds LoRA in exactly; its transformers' cross-attention has its role; what does not fit is
// refused by key.
#include "installed_plugins.hpp"

#include "../sdk/relative_error.hpp"
#include "weights/model_export.hpp"

#include <privdiff/components/adapter.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/io/safetensors.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace privdiff;
using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

const fs::path diffusers_fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "diffusers";
const fs::path sd = diffusers_fixtures / "sd_tiny";
using Values = std::map<std::string, ConfigValue>;

Values sd_values(Values extra = {}) {
  Values v{{"config", ConfigValue{(sd / "unet").string()}},        {"autoencoder", ConfigValue{(sd / "vae").string()}},
           {"text_encoder", ConfigValue{(sd / "text_encoder").string()}}, {"tokenizer", ConfigValue{(sd / "tokenizer").string()}},
           {"image_size", ConfigValue{std::int64_t{16}}},           {"beta_schedule", ConfigValue{std::string("scaled_linear")}},
           {"beta_start", ConfigValue{0.00085}},                    {"beta_end", ConfigValue{0.012}}};
  for (auto& [k, value] : extra) v[k] = value;
  return v;
}

std::unique_ptr<Model> stable_diffusion(Values extra = {}) {
  auto model = privdiff::testing::make_installed<Model>("diffusers_unet", sd_values(std::move(extra)));
  load_pretrained_weights(sd / "unet" / "diffusion_pytorch_model.safetensors", model->module());
  return model;
}

std::vector<std::string> prompts() {
  std::ifstream in(sd / "prompts.txt");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// x_t at the fixture's timesteps, in the discrete objective's terms: x = x_t / sqrt(abar_t), sigma_t.
struct NoisedLatents {
  at::Tensor x, sigma, scale;  // scale: sqrt(abar_t) per row
};
NoisedLatents at_reference_timesteps(const SafetensorsFile& reference) {
  const auto abar = diffusion::ddpm_alphas_cumprod("scaled_linear", 0.00085, 0.012, 1000);
  const at::Tensor t = reference.tensor("timestep").to(at::kLong);
  std::vector<double> scale, sigma;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double a = abar[static_cast<std::size_t>(t[i].item<std::int64_t>())];
    scale.push_back(std::sqrt(a));
    sigma.push_back(std::sqrt((1 - a) / a));
  }
  const at::Tensor s = at::tensor(scale, at::kDouble).to(at::kFloat).reshape({-1, 1, 1, 1});
  return {reference.tensor("latents") / s, at::tensor(sigma, at::kDouble).to(at::kFloat), s};
}

}  // namespace

TEST(StableDiffusionModel, DenoisesWithTheNoisePredictionDiffusersGivesThePrompts) {
  auto model = stable_diffusion();
  ASSERT_TRUE(model->conditions_on_text());
  const SafetensorsFile reference(sd / "reference.safetensors");
  const NoisedLatents n = at_reference_timesteps(reference);
  at::NoGradGuard no_grad;
  const at::Tensor denoised = model->denoise(n.x, n.sigma, Conditioning{{}, prompts()});
  // diffusers' x0 estimate from its eps at x_t: (x_t - sqrt(1 - abar) eps) / sqrt(abar)
  const at::Tensor eps = reference.tensor("eps");
  const at::Tensor expected = (reference.tensor("latents") - (1 - n.scale.pow(2)).sqrt() * eps) / n.scale;
  EXPECT_LT(privdiff::testing::relative_error(denoised, expected), 1e-5);
  // Other prompts, another estimate: the captions reach the UNet.
  const at::Tensor other = model->denoise(n.x, n.sigma, Conditioning{{}, {"", "a bag"}});
  EXPECT_GT(privdiff::testing::relative_error(other, expected), 1e-4);
}

TEST(StableDiffusionModel, DiffusersExportFoldsLoraInExactly) {
  auto adapted = stable_diffusion();
  privdiff::testing::make_installed<Adapter>("lora", {{"rank", ConfigValue{std::int64_t{2}}},
                                                      {"targets", ConfigValue{std::string("attn[12]\\.(to_q|to_k|to_v|to_out\\.0)$")}}})
      ->wrap(adapted->module());
  {
    at::NoGradGuard no_grad;
    at::manual_seed(4);
    for (auto& p : adapted->module().named_parameters()) {
      if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0, 0.3);  // off zero, so the fold matters
    }
  }
  core::ModelExport e;
  for (const auto& p : adapted->module().named_parameters()) e.tensors.emplace_back(p.key(), p.value().detach());
  for (const auto& b : adapted->module().named_buffers()) e.tensors.emplace_back(b.key(), b.value().detach());
  const std::size_t with_adapters = e.tensors.size();
  // 4 transformers (down level 0, the middle, up level 1's two), 2 attentions each, 4 projections each
  EXPECT_EQ(core::fold_adapters(e, adapted->module()), 4 * 2 * 4);
  EXPECT_EQ(e.tensors.size(), with_adapters - 2 * 32);  // lora_A and lora_B of each, gone
  auto plain = stable_diffusion();
  std::map<std::string, at::Tensor> folded(e.tensors.begin(), e.tensors.end());
  ASSERT_EQ(folded.size(), plain->module().named_parameters().size() + plain->module().named_buffers().size());
  {
    at::NoGradGuard no_grad;
    for (auto& p : plain->module().named_parameters()) p.value().copy_(folded.at(p.key()));
  }
  adapted->module().eval();
  plain->module().eval();
  const SafetensorsFile reference(sd / "reference.safetensors");
  const NoisedLatents n = at_reference_timesteps(reference);
  at::NoGradGuard no_grad;
  const at::Tensor want = adapted->denoise(n.x, n.sigma, Conditioning{{}, prompts()});
  EXPECT_LT(privdiff::testing::relative_error(plain->denoise(n.x, n.sigma, Conditioning{{}, prompts()}), want), 1e-5);
  EXPECT_GT(privdiff::testing::relative_error(stable_diffusion()->denoise(n.x, n.sigma, Conditioning{{}, prompts()}), want), 1e-4);
}

TEST(StableDiffusionModel, CrossAttentionHasItsRole) {
  auto model = stable_diffusion();
  int cross = 0, attention = 0;
  for (const auto& p : model->parameters_with_roles()) {
    if (p.name.find(".attn2.") != std::string::npos) cross += p.role == "cross_attention";
    else if (p.name.find(".attentions.") != std::string::npos) attention += p.role == "attention";
  }
  EXPECT_EQ(cross, 4 * 5);  // to_q, to_k, to_v, to_out.0 (weight and bias) in each of 4 transformers
  EXPECT_GT(attention, 0);
}

TEST(StableDiffusionModel, WhatDoesNotFitIsRefusedByKey) {
  using privdiff::testing::error_of;
  const auto make = [](Values extra) { return [extra] { privdiff::testing::make_installed<Model>("diffusers_unet", sd_values(extra)); }; };
  EXPECT_NE(error_of(make({{"text_encoder", ConfigValue{std::string()}}})).find("model.text_encoder: the UNet2DConditionModel "
                                                                               "cross-attends to a text encoder's states"),
            std::string::npos);
  EXPECT_NE(error_of(make({{"tokenizer", ConfigValue{std::string()}}})).find("model.tokenizer: the text encoder reads CLIP's"),
            std::string::npos);
  const auto other_encoder = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text" / "clip_text_sd1";  // 32 wide, 120 tokens
  EXPECT_NE(error_of(make({{"text_encoder", ConfigValue{other_encoder.string()}}}))
                .find("model.tokenizer: 3514 tokens, but the text encoder has 120"),
            std::string::npos);
  EXPECT_NE(error_of(make({{"config", ConfigValue{(diffusers_fixtures / "unet2d_condition_sd2").string()}}}))
                .find("model.text_encoder: its hidden_size is 32, but the UNet's cross_attention_dim is 24"),
            std::string::npos);
  EXPECT_NE(error_of(make({{"config", ConfigValue{(diffusers_fixtures / "unet2d_classes").string()}},
                           {"autoencoder", ConfigValue{std::string()}}}))
                .find("model.text_encoder: set, but the config.json is a UNet2DModel"),
            std::string::npos);
  EXPECT_NE(error_of(make({{"text_encoder", ConfigValue{sd.string()}}})).find("is not a transformers model folder"),
            std::string::npos);
}
