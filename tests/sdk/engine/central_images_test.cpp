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
  const std::vector<double> counts{6000, 3000};
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
  EXPECT_THROW(release_central_images(images, labels, 3, o, sampler, noise), std::invalid_argument);  // label 3 >= 3
}

// Neighbouring datasets (one record of a new label added or removed, an empty class) release the
// same number of images with the same shapes and labels, and neither is refused: what is released
// depends on the public class count only.
TEST(CentralImages, NeighbouringDatasetsReleaseTheSameShapesAndNeitherIsRefused) {
  for (const auto statistic : {CentralStatistic::mean, CentralStatistic::mode}) {
    auto o = options(statistic, 5.0);
    o.queries = 2;
    const at::Tensor images = at::rand({40, 1, 28, 28}, at::kFloat) * 2 - 1;
    const at::Tensor labels = at::arange(40, at::kLong).remainder(10);  // classes 0..9; model: 11 classes
    const at::Tensor plus_images = at::cat({images, at::zeros({1, 1, 28, 28})});
    const at::Tensor plus_labels = at::cat({labels, at::full({1}, 10, at::kLong)});  // the one record of label 10
    auto release = [&](const at::Tensor& x, const at::Tensor& y) {
      PoissonSampler sampler(x.size(0), 0.1, RandomStream::reproducible(1, 0, StreamPurpose::sampling));
      auto noise = GaussianNoise::seeded(5);
      return release_central_images(x, y, 11, o, sampler, noise);
    };
    const CentralImages without = release(images, labels);  // class 10 empty
    const CentralImages with = release(plus_images, plus_labels);
    EXPECT_EQ(without.images.sizes(), with.images.sizes());
    EXPECT_EQ(without.images.sizes(), (std::vector<std::int64_t>{22, 1, 28, 28}));
    EXPECT_TRUE(at::equal(without.labels, with.labels));
    EXPECT_TRUE(at::isfinite(without.images).all().item<bool>());
  }
}

TEST(CentralImages, TheDefaultDivisorIsPublicAndThePrivateCountsAreAChoice) {
  // Tiny noise, every record sampled (q = 1): a uniform divisor N / classes is the same for a class
  // of 30 records and one of 10; the private counts divide each class by its own size.
  auto o = options(CentralStatistic::mean, 1e-9);
  o.sampling_rate = 1.0;
  o.queries = 1;
  o.post_process = false;
  o.resolution = 28;
  const at::Tensor images = at::zeros({40, 1, 28, 28});  // pixel 0 -> p = 0.5
  const at::Tensor labels = at::cat({at::zeros({30}, at::kLong), at::ones({10}, at::kLong)});
  auto release = [&](ClassSizes sizes) {
    o.class_sizes = sizes;
    PoissonSampler sampler(40, 1.0, RandomStream::reproducible(1, 0, StreamPurpose::sampling));
    auto noise = GaussianNoise::seeded(6);
    return release_central_images(images, labels, 2, o, sampler, noise).images;
  };
  const at::Tensor uniform = release(ClassSizes::uniform);  // p sums 15 and 5 over 20 each
  EXPECT_NEAR((uniform[0].mean().item<double>() + 1) / 2, 0.75, 1e-4);
  EXPECT_NEAR((uniform[1].mean().item<double>() + 1) / 2, 0.25, 1e-4);
  const at::Tensor own = release(ClassSizes::private_counts);
  EXPECT_NEAR((own[0].mean().item<double>() + 1) / 2, 0.5, 1e-4);
  EXPECT_NEAR((own[1].mean().item<double>() + 1) / 2, 0.5, 1e-4);
  EXPECT_EQ(class_sizes_from_string("private"), ClassSizes::private_counts);
  EXPECT_THROW(class_sizes_from_string("histogram"), std::invalid_argument);
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
