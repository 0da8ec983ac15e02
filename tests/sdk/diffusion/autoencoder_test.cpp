// The latent autoencoder: shapes for both downsampling factors, the KL term against its closed form
// (hand values and a Monte Carlo estimate), LDM's scaling factor from the latent statistics, and a
// tiny model's reconstruction error falling over a few steps.
#include <privdiff/diffusion/autoencoder.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <cmath>

using namespace privdiff::sdk::diffusion;

namespace {

AutoencoderConfig tiny(std::vector<std::int64_t> mult) {
  AutoencoderConfig c;
  c.channels = 8;
  c.channel_mult = std::move(mult);
  c.latent_channels = 3;
  return c;
}

}  // namespace

TEST(Autoencoder, EncodesAndDecodesAtItsDownsamplingFactor) {
  for (const auto& [mult, side] : std::vector<std::pair<std::vector<std::int64_t>, std::int64_t>>{{{1, 2}, 14}, {{1, 2, 2}, 7}}) {
    Autoencoder ae(tiny(mult));
    EXPECT_EQ(ae.downsampling_factor(), 28 / side);
    const auto posterior = ae.encode(at::rand({2, 1, 28, 28}) * 2 - 1);
    EXPECT_EQ(posterior.mean.sizes(), (std::vector<std::int64_t>{2, 3, side, side}));
    EXPECT_EQ(posterior.logvar.sizes(), posterior.mean.sizes());
    EXPECT_EQ(ae.decode(posterior.mean).sizes(), (std::vector<std::int64_t>{2, 1, 28, 28}));
  }
  Autoencoder ae(tiny({1, 2, 2}));
  EXPECT_THROW(ae.encode(at::rand({1, 1, 30, 30})), std::invalid_argument);  // 30 is not a multiple of 4
}

TEST(Autoencoder, KlIsTheClosedFormPerExample) {
  // KL(N(m, s^2) || N(0, 1)) = (m^2 + s^2 - 1 - log s^2) / 2 per element, summed per example.
  const at::Tensor mean = at::tensor({1.0, 0.0, -2.0, 0.5}, at::kDouble).reshape({2, 2});
  const at::Tensor logvar = at::tensor({0.0, std::log(4.0), 0.0, std::log(0.25)}, at::kDouble).reshape({2, 2});
  const at::Tensor kl = gaussian_kl(mean, logvar);
  EXPECT_NEAR(kl[0].item<double>(), 0.5 + 0.5 * (4.0 - 1.0 - std::log(4.0)), 1e-12);
  EXPECT_NEAR(kl[1].item<double>(), 2.0 + 0.5 * (0.25 + 0.25 - 1.0 - std::log(0.25)), 1e-12);
  // Monte Carlo: E_q[log q(z) - log p(z)] with 400k draws.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const double m = 0.7, s = 0.6;
  const at::Tensor z = m + s * at::randn({400000}, gen, at::kDouble);
  const at::Tensor log_ratio = -0.5 * ((z - m) / s).pow(2) - std::log(s) + 0.5 * z.pow(2);
  const double exact = gaussian_kl(at::full({1, 1}, m, at::kDouble), at::full({1, 1}, std::log(s * s), at::kDouble)).item<double>();
  EXPECT_NEAR(log_ratio.mean().item<double>(), exact, 0.01);
}

TEST(Autoencoder, ScaleFactorIsOneOverTheStdOfTheObservedLatents) {
  Autoencoder ae(tiny({1, 2}));
  EXPECT_EQ(ae.scale_factor(), 1.0);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor images = at::rand({6, 1, 8, 8}, gen) * 2 - 1;
  ae.observe_latents(images.slice(0, 0, 4));  // in batches: the same as all at once
  ae.observe_latents(images.slice(0, 4, 6));
  const at::Tensor means = ae.encode(images).mean.to(at::kDouble);
  EXPECT_NEAR(ae.scale_factor(), 1.0 / means.std(/*unbiased=*/false).item<double>(), 1e-6);
  (void)ae.loss(images * 3, gen);  // training does not move the estimate: only observing does
  EXPECT_NEAR(ae.scale_factor(), 1.0 / means.std(false).item<double>(), 1e-6);
  ae.reset_latent_statistics();
  EXPECT_EQ(ae.scale_factor(), 1.0);
}

TEST(Autoencoder, ATinyModelLearnsToReconstruct) {
  at::manual_seed(0);
  Autoencoder ae(tiny({1, 2}));
  ae.train();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  // Sixteen 8x8 images: horizontal and vertical bars at random places.
  at::Tensor images = -at::ones({16, 1, 8, 8});
  for (std::int64_t i = 0; i < 16; ++i) {
    if (i % 2) {
      images[i].select(1, i % 8).fill_(1.0);
    } else {
      images[i].select(2, (3 * i) % 8).fill_(1.0);
    }
  }
  torch::optim::Adam optimizer(ae.parameters(), torch::optim::AdamOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    optimizer.zero_grad();
    const at::Tensor loss = ae.loss(images, gen).mean();
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}
