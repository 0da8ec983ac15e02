// Clipping, noise, Poisson sampling and the logical-step gradient: the privacy-critical arithmetic
// of DP-SGD, each against its definition.
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/poisson_sampler.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/engine/random_stream.hpp>

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

PoissonSampler seeded_sampler(std::int64_t n, double q, std::uint64_t seed) {
  return PoissonSampler(n, q, RandomStream::reproducible(seed, 0, StreamPurpose::sampling));
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
  PoissonSampler sampler = seeded_sampler(n, q, 5);
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
  PoissonSampler sparse = seeded_sampler(10, 0.01, 9);
  int empty = 0;
  for (int s = 0; s < 200; ++s) empty += sparse.next().numel() == 0;
  EXPECT_GT(empty, 150);  // P(empty) = 0.99^10 = 0.90
  PoissonSampler a = seeded_sampler(1000, 0.1, 3), b = seeded_sampler(1000, 0.1, 3);
  for (int s = 0; s < 5; ++s) EXPECT_TRUE(at::equal(a.next(), b.next()));
  const at::Tensor state = a.state();
  const at::Tensor next = a.next();
  b.next();
  b.set_state(state);
  EXPECT_TRUE(at::equal(b.next(), next));
  EXPECT_THROW(seeded_sampler(0, 0.1, 1), std::invalid_argument);
  EXPECT_THROW(seeded_sampler(10, 0, 1), std::invalid_argument);
}

// The keystream is ChaCha20 (RFC 8439): its published test vectors, byte for byte.
TEST(RandomStream, IsChaCha20ByTheRfc8439TestVectors) {
  // §2.3.2: key 00..1f, block counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00 (with our
  // 64-bit counter, state words 12-13 = 1, 0x09000000; words 14-15 = 0x4a000000, 0).
  RandomStream::Key key;
  for (std::uint32_t i = 0; i < 8; ++i) key[i] = (4 * i) | (4 * i + 1) << 8 | (4 * i + 2) << 16 | (4 * i + 3) << 24;
  const auto block = RandomStream::block(key, 0x4a000000, 1 | (std::uint64_t{0x09000000} << 32));
  const std::uint8_t expected[64] = {
      0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20, 0x71, 0xc4,
      0xc7, 0xd1, 0xf4, 0xc7, 0x33, 0xc0, 0x68, 0x03, 0x04, 0x22, 0xaa, 0x9a, 0xc3, 0xd4, 0x6c, 0x4e,
      0xd2, 0x82, 0x64, 0x46, 0x07, 0x9f, 0xaa, 0x09, 0x14, 0xc2, 0xd7, 0x05, 0xd9, 0x8b, 0x02, 0xa2,
      0xb5, 0x12, 0x9c, 0xd1, 0xde, 0x16, 0x4e, 0xb9, 0xcb, 0xd0, 0x83, 0xe8, 0xa2, 0x50, 0x3c, 0x4e};
  for (int i = 0; i < 64; ++i) EXPECT_EQ(block[static_cast<std::size_t>(i)], expected[i]) << "byte " << i;
  // Appendix A.1 test vector #1: all-zero key, nonce and counter.
  const auto zero = RandomStream::block(RandomStream::Key{}, 0, 0);
  const std::uint8_t zero_expected[16] = {0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90,
                                          0x40, 0x5d, 0x6a, 0xe5, 0x53, 0x86, 0xbd, 0x28};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(zero[static_cast<std::size_t>(i)], zero_expected[i]) << "byte " << i;
}

TEST(RandomStream, SecretStreamsDifferAndNeverExposeTheirState) {
  RandomStream a = RandomStream::secret(StreamPurpose::noise), b = RandomStream::secret(StreamPurpose::noise);
  EXPECT_TRUE(a.is_secret());
  EXPECT_NE(a.words(8), b.words(8));
  EXPECT_THROW(a.state(), std::logic_error);
  EXPECT_THROW(a.set_state(RandomStream::reproducible(1, 0, StreamPurpose::noise).state()), std::logic_error);
  // Reproducible streams: one per (seed, stage, purpose), and their state round-trips.
  auto stream = [](std::uint64_t seed, std::uint64_t stage, StreamPurpose p) {
    return RandomStream::reproducible(seed, stage, p).words(4);
  };
  EXPECT_EQ(stream(7, 0, StreamPurpose::noise), stream(7, 0, StreamPurpose::noise));
  EXPECT_NE(stream(7, 0, StreamPurpose::noise), stream(7, 1, StreamPurpose::noise));  // same seed, other stage
  EXPECT_NE(stream(7, 0, StreamPurpose::noise), stream(7, 0, StreamPurpose::sampling));
  RandomStream r = RandomStream::reproducible(7, 0, StreamPurpose::noise);
  r.words(3);
  const at::Tensor state = r.state();
  const auto next = r.words(5);
  RandomStream other = RandomStream::reproducible(99, 4, StreamPurpose::sampling);
  other.set_state(state);
  EXPECT_EQ(other.words(5), next);
}

// Defect 2 of the privacy audit: LibTorch's CPU generator keeps 32 bits of a 64-bit seed, so
// batches could be recovered by 2^32 guesses. The sampler's stream must depend on every bit.
TEST(PoissonSampler, SeedsDifferingOnlyAboveBit32GiveDifferentBatches) {
  for (int bit : {32, 40, 63}) {
    const std::uint64_t low = 0x1234567ULL, high = low | (std::uint64_t{1} << bit);
    PoissonSampler a = seeded_sampler(2000, 0.1, low), b = seeded_sampler(2000, 0.1, high);
    EXPECT_FALSE(at::equal(a.next(), b.next())) << "bit " << bit;
  }
  PoissonSampler a(2000, 0.1, RandomStream::secret(StreamPurpose::sampling));
  PoissonSampler b(2000, 0.1, RandomStream::secret(StreamPurpose::sampling));
  EXPECT_TRUE(a.is_secret());
  EXPECT_FALSE(at::equal(a.next(), b.next()));
  EXPECT_THROW(a.state(), std::logic_error);  // secret batches never reach a checkpoint
}

TEST(PoissonSampler, EveryExampleIsIncludedWithProbabilityQ) {
  // Secret stream, many draws: the overall inclusion rate within 5 standard errors of q, and
  // every single example's rate within 5 of its own standard errors.
  const std::int64_t n = 500, draws = 4000;
  const double q = 0.07;
  PoissonSampler sampler(n, q, RandomStream::secret(StreamPurpose::sampling));
  at::Tensor counts = at::zeros({n}, at::kDouble);
  for (std::int64_t d = 0; d < draws; ++d) {
    const at::Tensor batch = sampler.next();
    counts.index_add_(0, batch, at::ones({batch.numel()}, at::kDouble));
  }
  const double total_se = std::sqrt(q * (1 - q) / static_cast<double>(n * draws));
  EXPECT_NEAR(counts.sum().item<double>() / static_cast<double>(n * draws), q, 5 * total_se);
  const double one_se = std::sqrt(q * (1 - q) / static_cast<double>(draws));
  const at::Tensor rates = counts / static_cast<double>(draws);
  EXPECT_LT((rates - q).abs().max().item<double>(), 5 * one_se);
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
