// DP-FETA central images: the mean query's noise scale and divisor, the mode query's histograms,
// noise and midpoints, the privacy event, and the refusals.
#include <privdiff/data/image_filters.hpp>
#include <privdiff/engine/central_images.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace privdiff::sdk;
using namespace privdiff::sdk::engine;

namespace {

CentralImageOptions options(CentralStatistic s, double sigma) {
  CentralImageOptions o;
  o.statistic = s;
  o.noise_multiplier = sigma;
  o.sampling_rate = 0.1;
  o.resolution = 14;
  o.bins = 4;
  return o;
}

}  // namespace

TEST(CentralMean, NoiseStdIsSigmaDeltaOverTheExpectedClassCount) {
  // An empty subsample: pure noise (no division by zero), std sigma * Delta / (q * N_class).
  const auto o = options(CentralStatistic::mean, 5.0);
  auto noise = GaussianNoise::seeded(1);
  const at::Tensor none = at::zeros({0, 1, 14, 14}, at::kDouble);
  const std::vector<std::int64_t> counts{6000, 3000};
  const at::Tensor out = central_mean(none, at::zeros({0}, at::kLong), counts, o, noise);
  ASSERT_EQ(out.sizes(), (std::vector<std::int64_t>{2, 1, 14, 14}));
  EXPECT_DOUBLE_EQ(central_mean_sensitivity(1, 14), 14.0);
  for (std::int64_t c = 0; c < 2; ++c) {
    const double want = 5.0 * 14.0 / (0.1 * static_cast<double>(counts[static_cast<std::size_t>(c)]));
    const double got = out[c].std().item<double>();  // 196 samples: within ~15%
    EXPECT_NEAR(got / want, 1.0, 0.15) << "class " << c;
    EXPECT_NEAR(out[c].mean().item<double>(), 0.0, 4 * want / 14.0);
  }
}

TEST(CentralMean, DividesTheNoisySumByTheExpectedCountNotTheRealisedOne) {
  // Tiny noise: the release is the class sum over q * N_class, whatever the subsample's size.
  auto o = options(CentralStatistic::mean, 1e-9);
  auto noise = GaussianNoise::seeded(2);
  const at::Tensor sampled = at::full({3, 1, 14, 14}, 0.5, at::kDouble);
  const at::Tensor labels = at::tensor(std::vector<std::int64_t>{0, 0, 1});
  const at::Tensor out = central_mean(sampled, labels, {40, 10}, o, noise);
  EXPECT_NEAR(out[0].mean().item<double>(), 2 * 0.5 / (0.1 * 40), 1e-6);  // 0.25, not 0.5
  EXPECT_NEAR(out[1].mean().item<double>(), 1 * 0.5 / (0.1 * 10), 1e-6);  // 0.5
}

TEST(CentralMode, CountsNoiseScaleAndMidpoints) {
  auto o = options(CentralStatistic::mode, 1e-9);
  auto noise = GaussianNoise::seeded(3);
  // Class 0: three images whose pixels fall in bin 2 of 4 ([0.5, 0.75)) and one in bin 0.
  at::Tensor sampled = at::full({4, 1, 2, 2}, 0.6, at::kDouble);
  sampled[3].fill_(0.1);
  const at::Tensor labels = at::zeros({4}, at::kLong);
  const at::Tensor out = central_mode(sampled, labels, 2, o, noise);
  EXPECT_TRUE(at::allclose(out[0], at::full({1, 2, 2}, 2.5 / 4, at::kDouble)));
  // Noise std sigma * sqrt(d): with sigma = 1 and d = 4 pixels the noise on counts has std 2, so an
  // empty class's argmax is uniform over the bins; over many pixels every bin wins sometimes.
  o.noise_multiplier = 1.0;
  const at::Tensor many = at::zeros({0, 1, 30, 30}, at::kDouble);
  const at::Tensor noisy = central_mode(many, at::zeros({0}, at::kLong), 1, o, noise);
  for (int b = 0; b < 4; ++b) EXPECT_GT(noisy.eq((b + 0.5) / 4).sum().item<int>(), 150) << "bin " << b;
}

TEST(CentralImages, OneSubsampledGaussianPerQuery) {
  auto o = options(CentralStatistic::mean, 5.0);
  o.queries = 5;
  const PrivacyEvent e = central_images_event(o);
  EXPECT_EQ(e.to_string(), PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.1, PrivacyEvent::gaussian(5.0)), 5)
                               .to_string());
}

TEST(CentralImages, ReleasesOneImagePerClassPerQueryAndRefusesBadInput) {
  auto o = options(CentralStatistic::mean, 5.0);
  o.queries = 3;
  const at::Tensor images = at::rand({200, 1, 28, 28}, at::kFloat) * 2 - 1;
  const at::Tensor labels = at::arange(200, at::kLong).remainder(4);
  PoissonSampler sampler(200, 0.1, RandomStream::reproducible(1, 0, StreamPurpose::sampling));
  auto noise = GaussianNoise::seeded(4);
  const CentralImages c = release_central_images(images, labels, 4, o, sampler, noise);
  EXPECT_EQ(c.images.sizes(), (std::vector<std::int64_t>{12, 1, 28, 28}));
  EXPECT_TRUE(at::equal(c.labels, at::arange(4, at::kLong).repeat({3})));
  EXPECT_LE(c.images.max().item<double>(), 1.0);
  EXPECT_GE(c.images.min().item<double>(), -1.0);

  at::Tensor outside = images.clone();
  outside[0][0][0][0] = 1.5;
  EXPECT_THROW(release_central_images(outside, labels, 4, o, sampler, noise), std::invalid_argument);
  EXPECT_THROW(release_central_images(images, labels, 5, o, sampler, noise), std::invalid_argument);  // class 4 empty
}

TEST(CentralImages, PostProcessingIsTheMedianBlurThenSharpeningOfTheRawRelease) {
  auto o = options(CentralStatistic::mean, 5.0);
  o.queries = 2;
  const at::Tensor images = at::rand({200, 1, 28, 28}, at::kFloat) * 2 - 1;
  const at::Tensor labels = at::arange(200, at::kLong).remainder(4);
  auto release = [&](bool post) {
    o.post_process = post;
    PoissonSampler sampler(200, 0.1, RandomStream::reproducible(1, 0, StreamPurpose::sampling));
    auto noise = GaussianNoise::seeded(4);
    return release_central_images(images, labels, 4, o, sampler, noise).images;
  };
  const at::Tensor raw = release(false), processed = release(true);
  EXPECT_TRUE(at::allclose(processed, data::sharpen(data::median_blur3(raw)), 1e-5, 1e-5));
  EXPECT_FALSE(at::allclose(processed, raw, 1e-3, 1e-3));
}
