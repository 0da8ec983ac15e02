// Clipping, noise, Poisson sampling and the logical-step gradient: the privacy-critical arithmetic
// of DP-SGD, each against its definition.
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/private_gradient.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk::engine;

namespace {

// Per-example gradients of two "parameters" with chosen norms.
PerExampleGradients gradients(std::int64_t b, std::uint64_t seed, double scale) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  PerExampleGradients g;
  g.params = {at::zeros({3, 4}, opt), at::zeros({5}, opt)};
  g.grads = {at::randn({b, 3, 4}, gen, opt) * scale, at::randn({b, 5}, gen, opt) * scale};
  g.num_examples = b;
  return g;
}

at::Tensor whole_norms(const PerExampleGradients& g, const at::Tensor& factors, bool per_layer) {
  at::Tensor sq = at::zeros({g.num_examples}, at::kDouble);
  for (std::size_t j = 0; j < g.grads.size(); ++j) {
    const at::Tensor f = per_layer ? factors.select(1, static_cast<std::int64_t>(j)) : factors;
    sq += (g.grads[j].reshape({g.num_examples, -1}) * f.unsqueeze(1)).pow(2).sum(1);
  }
  return sq.sqrt();
}

}  // namespace

TEST(Clipping, EveryClippedFlatGradientHasNormAtMostC) {
  const auto g = gradients(64, 1, 3.0);  // norms ~ 3 * sqrt(17) >> C
  const double c = 1.5;
  const auto clipped = clip_and_sum(g, c, ClipMode::flat);
  const at::Tensor norms = whole_norms(g, clipped.factors, false);
  EXPECT_LE(norms.max().item<double>(), c * (1 + 1e-12));
  EXPECT_GT(norms.min().item<double>(), c * 0.999);  // all were above C: clipped to C (minus 1e-6)
  // Factor definition: min(1, C / (||g|| + 1e-6)).
  EXPECT_TRUE(at::allclose(clipped.factors, (c / (clipped.norms + 1e-6)).clamp_max(1.0)));
  // The sum is the sum of the scaled gradients.
  EXPECT_TRUE(at::allclose(clipped.sums[0], (g.grads[0] * clipped.factors.view({-1, 1, 1})).sum(0)));
}

TEST(Clipping, SmallGradientsAreLeftAlone) {
  const auto g = gradients(16, 2, 1e-3);
  const auto clipped = clip_and_sum(g, 1.0, ClipMode::flat);
  EXPECT_TRUE(at::allclose(clipped.factors, at::ones({16}, at::kDouble)));
  EXPECT_TRUE(at::allclose(clipped.sums[1], g.grads[1].sum(0)));
}

TEST(Clipping, PerLayerBoundsEachTensorAndTheWhole) {
  const auto g = gradients(32, 3, 2.0);
  const double c = 1.0;
  const auto clipped = clip_and_sum(g, c, ClipMode::per_layer);
  ASSERT_EQ(clipped.factors.sizes(), (std::vector<std::int64_t>{32, 2}));
  for (std::size_t j = 0; j < 2; ++j) {
    const at::Tensor n = (g.grads[j].reshape({32, -1}) * clipped.factors.select(1, j).unsqueeze(1)).norm(2, {1});
    EXPECT_LE(n.max().item<double>(), c / std::sqrt(2.0) * (1 + 1e-12));
  }
  EXPECT_LE(whole_norms(g, clipped.factors, true).max().item<double>(), c * (1 + 1e-12));
  EXPECT_THROW(clip_mode_from_string("adaptive"), std::invalid_argument);
}

TEST(GaussianNoise, HasTheRightStdWithAToleranceFromTheSampleSize) {
  const std::int64_t n = 1000000;
  const double std = 2.5;
  auto noise = GaussianNoise::seeded(42);
  const at::Tensor z = noise.sample(at::zeros({n}, at::kDouble), std);
  // Sample mean ~ N(0, std^2/n); sample std ~ N(std, std^2/(2n)): allow 5 standard errors.
  EXPECT_NEAR(z.mean().item<double>(), 0.0, 5 * std / std::sqrt(double(n)));
  EXPECT_NEAR(z.std().item<double>(), std, 5 * std / std::sqrt(2.0 * n));
  // Same seed, same noise; another seed, other noise.
  auto again = GaussianNoise::seeded(42);
  EXPECT_TRUE(at::equal(again.sample(at::zeros({n}, at::kDouble), std), z));
  auto other = GaussianNoise::seeded(43);
  EXPECT_FALSE(at::equal(other.sample(at::zeros({n}, at::kDouble), std), z));
}

TEST(GaussianNoise, SecureNoiseHasTheRightStdAndIsNotReproducible) {
  const std::int64_t n = 400000;
  const double std = 0.7;
  auto noise = GaussianNoise::secure();
  EXPECT_TRUE(noise.is_secure());
  const at::Tensor z = noise.sample(at::zeros({n}, at::kFloat), std);
  EXPECT_EQ(z.scalar_type(), at::kFloat);
  EXPECT_NEAR(z.mean().item<double>(), 0.0, 5 * std / std::sqrt(double(n)));
  EXPECT_NEAR(z.to(at::kDouble).std().item<double>(), std, 5 * std / std::sqrt(2.0 * n));
  EXPECT_FALSE(at::equal(noise.sample(at::zeros({n}, at::kFloat), std), z));
}

TEST(PoissonSampler, BatchSizesHaveMeanQNAndBinomialVariance) {
  const std::int64_t n = 10000, steps = 3000;
  const double q = 0.01;
  PoissonSampler sampler(n, q, 5);
  EXPECT_DOUBLE_EQ(sampler.expected_batch_size(), 100.0);
  std::vector<double> sizes;
  for (int s = 0; s < steps; ++s) {
    const at::Tensor batch = sampler.next();
    sizes.push_back(static_cast<double>(batch.numel()));
    if (s == 0) {
      EXPECT_TRUE(at::equal(batch, std::get<0>(batch.sort())));  // sorted, distinct, in range
      EXPECT_EQ(std::get<0>(at::_unique(batch)).numel(), batch.numel());
      EXPECT_GE(batch.min().item<std::int64_t>(), 0);
      EXPECT_LT(batch.max().item<std::int64_t>(), n);
    }
  }
  const at::Tensor t = at::tensor(sizes, at::kDouble);
  const double var = n * q * (1 - q);
  EXPECT_NEAR(t.mean().item<double>(), n * q, 5 * std::sqrt(var / steps));
  EXPECT_NEAR(t.var().item<double>(), var, 5 * var * std::sqrt(2.0 / (steps - 1)));
}

TEST(PoissonSampler, EmptyBatchesAreLegalAndSeedsReproduce) {
  PoissonSampler sparse(10, 0.01, 9);
  int empty = 0;
  for (int s = 0; s < 200; ++s) empty += sparse.next().numel() == 0;
  EXPECT_GT(empty, 150);  // P(empty) = 0.99^10 = 0.90
  PoissonSampler a(1000, 0.1, 3), b(1000, 0.1, 3);
  for (int s = 0; s < 5; ++s) EXPECT_TRUE(at::equal(a.next(), b.next()));
  const at::Tensor state = a.state();
  const at::Tensor next = a.next();
  b.next();
  b.set_state(state);
  EXPECT_TRUE(at::equal(b.next(), next));
  EXPECT_THROW(PoissonSampler(0, 0.1, 1), std::invalid_argument);
  EXPECT_THROW(PoissonSampler(10, 0, 1), std::invalid_argument);
}

TEST(PrivateGradient, SplittingALogicalBatchIntoChunksGivesTheSameUpdate) {
  const auto all = gradients(30, 11, 2.0);
  auto chunk = [&](std::int64_t start, std::int64_t len) {
    PerExampleGradients c;
    c.params = all.params;
    for (const auto& g : all.grads) c.grads.push_back(g.narrow(0, start, len));
    c.num_examples = len;
    return c;
  };
  PrivateGradient one(all.params, 1.0, ClipMode::flat), three(all.params, 1.0, ClipMode::flat);
  one.add(all);
  three.add(chunk(0, 7));
  three.add(chunk(7, 0));
  three.add(chunk(7, 13));
  three.add(chunk(20, 10));
  auto noise1 = GaussianNoise::seeded(77), noise3 = GaussianNoise::seeded(77);
  const auto g1 = one.finish(1.3, 25.0, noise1);
  const auto g3 = three.finish(1.3, 25.0, noise3);
  EXPECT_EQ(three.examples(), 30);
  for (std::size_t j = 0; j < g1.size(); ++j) EXPECT_TRUE(at::allclose(g1[j], g3[j], 1e-12, 1e-14));
}

TEST(PrivateGradient, IsClippedSumPlusNoiseOverTheExpectedBatchSize) {
  const auto g = gradients(20, 12, 2.0);
  const double sigma = 0.9, c = 1.5, expected = 16.0;  // expected (q N), not the realised 20
  PrivateGradient step(g.params, c, ClipMode::flat);
  step.add(g);
  auto noise = GaussianNoise::seeded(5), reference = GaussianNoise::seeded(5);
  const auto out = step.finish(sigma, expected, noise);
  const auto clipped = clip_and_sum(g, c, ClipMode::flat);
  for (std::size_t j = 0; j < out.size(); ++j) {
    const at::Tensor want = (clipped.sums[j] + reference.sample(clipped.sums[j], sigma * c)) / expected;
    EXPECT_TRUE(at::allclose(out[j], want, 1e-12, 1e-14));
  }
  EXPECT_THROW(step.finish(sigma, expected, noise), std::logic_error);  // noise once per step
}

TEST(PrivateGradient, AnEmptyBatchIsPureNoise) {
  const auto g = gradients(1, 13, 1.0);
  PrivateGradient step(g.params, 2.0, ClipMode::flat);
  auto noise = GaussianNoise::seeded(8), reference = GaussianNoise::seeded(8);
  const auto out = step.finish(1.1, 50.0, noise);
  EXPECT_EQ(step.examples(), 0);
  for (std::size_t j = 0; j < out.size(); ++j) {
    EXPECT_TRUE(at::allclose(out[j], reference.sample(g.params[j], 1.1 * 2.0) / 50.0, 1e-12, 1e-14));
    EXPECT_GT(out[j].abs().max().item<double>(), 0);
  }
}
