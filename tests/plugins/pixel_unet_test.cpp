#include "installed_plugins.hpp"

#include <privdiff/components/model.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

using namespace privdiff;
using namespace privdiff::sdk;

TEST(PixelUnet, DpdmFashionMnistConfigurationSize) {
  auto model = privdiff::testing::make_installed<Model>("pixel_unet");  // defaults = DPDM's MNIST/F-MNIST config
  std::int64_t n = 0;
  for (const auto& p : model->module().parameters()) n += p.numel();
  // DPDM reports ~1.75M for its DDPM++; ours uses strided-conv resampling instead of BigGAN resample blocks.
  EXPECT_GT(n, 1500000);
  EXPECT_LT(n, 1900000);
  EXPECT_EQ(model->sample_shape(), (std::vector<std::int64_t>{1, 28, 28}));
  // Every parameter has a role; attention and resblock parameters carry block indices.
  bool attention = false;
  for (const auto& info : model->parameters_with_roles()) {
    EXPECT_FALSE(info.role.empty());
    if (info.role == "attention") {
      attention = true;
      EXPECT_GE(info.block_index, 0);
    }
  }
  EXPECT_TRUE(attention);
}

TEST(PixelUnet, DenoiserAndTrainingLossShapes) {
  for (const std::string p : {"edm", "vp", "ve", "v"}) {
    auto model = privdiff::testing::make_installed<Model>(
        "pixel_unet", {{"channels", ConfigValue{std::int64_t{8}}},
                       {"channel_mult", ConfigValue{std::vector<std::int64_t>{1, 2}}},
                       {"num_res_blocks", ConfigValue{std::int64_t{1}}},
                       {"attention_resolutions", ConfigValue{std::vector<std::int64_t>{14}}},
                       {"preconditioning", ConfigValue{p}}});
    const at::Tensor x = at::rand({3, 1, 28, 28}) * 2 - 1;
    const at::Tensor d = model->denoise(x, at::full({3}, 0.5), Conditioning{at::tensor({1, 2, 10}, at::kLong)});
    EXPECT_EQ(d.sizes(), x.sizes());
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    const at::Tensor rows = model->training_loss(x, Conditioning{at::tensor({1, 2, 3}, at::kLong)}, 4, gen);
    EXPECT_EQ(rows.sizes(), std::vector<std::int64_t>{12}) << p;
    EXPECT_TRUE(at::isfinite(rows).all().item<bool>()) << p;
  }
}
