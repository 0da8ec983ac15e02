// FETA-Pro's frequency release (engine/rff_embedding.hpp) and its auxiliary generator
// (engine/mmd_generator.hpp): the features against a per-record loop in plain doubles and against
// the Gaussian kernel they approximate, the sensitivity on extreme records, the privacy event, and
// a generator that learns to match an embedding.
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/mmd_generator.hpp>
#include <privdiff/engine/rff_embedding.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <stdexcept>
#include <vector>

using namespace privdiff::sdk;
using namespace privdiff::sdk::engine;

namespace {

RffOptions small(std::int64_t features = 64) {
  RffOptions o;
  o.features = features;
  o.length_scale = std::sqrt(105.0) / 8;  // a width that suits 4 x 4 images
  o.noise_multiplier = 2.0;
  return o;
}

}  // namespace

// The class sums against a loop over records and features with std::cos / std::sin, from the same
// frequencies; pixels p = (x + 1) / 2.
TEST(RffEmbedding, ClassSumsEqualAPerRecordLoop) {
  const RffOptions o = small(16);
  const at::Tensor w = rff_frequencies(16, o, 3).to(at::kDouble);
  const at::Tensor images = at::rand({7, 1, 4, 4}, at::kDouble) * 2 - 1;
  const at::Tensor labels = at::tensor(std::vector<std::int64_t>{0, 2, 1, 2, 0, 0, 1});
  const at::Tensor sums = rff_class_sums(images, labels, 3, w.to(at::kFloat));
  ASSERT_EQ(sums.sizes(), (std::vector<std::int64_t>{3, 16}));
  std::vector<double> expected(3 * 16, 0.0);
  for (std::int64_t i = 0; i < 7; ++i) {
    const std::int64_t c = labels[i].item<std::int64_t>();
    for (std::int64_t f = 0; f < 8; ++f) {
      double angle = 0;
      for (std::int64_t d = 0; d < 16; ++d) {
        angle += w[f][d].item<double>() * (images[i].flatten()[d].item<double>() + 1) / 2;
      }
      expected[c * 16 + f] += std::cos(angle) / std::sqrt(8.0);
      expected[c * 16 + 8 + f] += std::sin(angle) / std::sqrt(8.0);
    }
  }
  for (std::int64_t k = 0; k < 3 * 16; ++k) EXPECT_NEAR(sums.flatten()[k].item<double>(), expected[k], 1e-5) << k;
}

// phi(p) . phi(q) approximates exp(-||p - q||^2 / (2 rff_sigma)) (the kernel the frequencies
// N(0, 1 / rff_sigma) define), and every feature row has norm 1.
TEST(RffEmbedding, FeaturesApproximateTheGaussianKernelWithUnitNorm) {
  RffOptions o;
  o.features = 20000;
  o.length_scale = std::sqrt(2.0);
  const at::Tensor w = rff_frequencies(6, o, 1);
  const at::Tensor p = at::rand({5, 6}, at::kFloat);
  const at::Tensor phi = rff_features(p, w);
  EXPECT_LT((phi.norm(2, {1}) - 1).abs().max().item<double>(), 1e-12);
  const at::Tensor approx = at::matmul(phi, phi.t());
  const at::Tensor distance = at::cdist(p.to(at::kDouble), p.to(at::kDouble)).pow(2);
  const at::Tensor kernel = at::exp(-distance / (2 * 2.0));
  EXPECT_LT((approx - kernel).abs().max().item<double>(), 0.03) << approx << kernel;
}

// Adding one record, extreme or typical, moves one class's row by its features: L2 norm 1, never more.
TEST(RffEmbedding, OneRecordMovesTheSumsByNormOne) {
  const RffOptions o = small();
  const at::Tensor w = rff_frequencies(16, o, 5);
  const at::Tensor images = at::rand({10, 1, 4, 4}) * 2 - 1;
  const at::Tensor labels = at::arange(10, at::kLong).remainder(3);
  const at::Tensor base = rff_class_sums(images, labels, 3, w);
  for (const at::Tensor& x : {at::ones({1, 1, 4, 4}), -at::ones({1, 1, 4, 4}), at::rand({1, 1, 4, 4}) * 2 - 1}) {
    const at::Tensor with = rff_class_sums(at::cat({images, x}), at::cat({labels, at::tensor({2L})}), 3, w);
    const at::Tensor moved = with - base;
    EXPECT_NEAR(moved.norm().item<double>(), 1.0, 1e-12);
    EXPECT_EQ(moved.narrow(0, 0, 2).abs().max().item<double>(), 0.0);  // the other classes' rows
  }
  EXPECT_THROW(rff_class_sums(at::full({1, 1, 4, 4}, 1.5), at::zeros({1}, at::kLong), 3, w), std::invalid_argument);
  EXPECT_THROW(rff_class_sums(at::full({1, 1, 4, 4}, std::nan("")), at::zeros({1}, at::kLong), 3, w),
               std::invalid_argument);  // NaN compares false both ways: refused all the same
  EXPECT_THROW(rff_class_sums(images, labels + 1, 3, w), std::invalid_argument);
}

// The release is the sums plus N(0, sigma^2) per entry: one Gaussian mechanism with sensitivity 1.
TEST(RffEmbedding, TheReleaseIsOneGaussianMechanism) {
  RffOptions o = small(2000);
  o.noise_multiplier = 3.0;
  const at::Tensor w = rff_frequencies(16, o, 2);
  const at::Tensor images = at::rand({6, 1, 4, 4}) * 2 - 1;
  const at::Tensor labels = at::arange(6, at::kLong).remainder(2);
  auto noise = GaussianNoise::seeded(4);
  const at::Tensor noisy = rff_noisy_class_sums(images, labels, 2, w, o, noise);
  const at::Tensor residual = noisy - rff_class_sums(images, labels, 2, w);
  EXPECT_NEAR(residual.std().item<double>(), 3.0, 0.1);
  EXPECT_TRUE(rff_embedding_event(o) == PrivacyEvent::gaussian(3.0));
  o.features = 3;
  EXPECT_THROW(rff_embedding_event(o), std::invalid_argument);
}

// The generator fits an embedding: two classes of constant images (-0.6 and +0.6). On a balanced
// batch (the training batches' random labels add a floor of their own), its MMD after training is a
// small fraction of its untrained one, and each class's images sit near its level.
TEST(MmdGenerator, LearnsToMatchAnEmbedding) {
  torch::manual_seed(0);
  const RffOptions o = small(256);
  const at::Tensor w = rff_frequencies(16, o, 7);
  const at::Tensor images = at::cat({at::full({20, 1, 4, 4}, -0.6), at::full({20, 1, 4, 4}, 0.6)});
  const at::Tensor labels = at::cat({at::zeros({20}, at::kLong), at::ones({20}, at::kLong)});
  const at::Tensor target = rff_class_sums(images, labels, 2, w) / 40.0;
  MmdGeneratorOptions g;
  g.latent_dim = 4;
  g.channels = 8;
  g.steps = 300;
  g.batch_size = 32;
  g.lr = 0.01;
  g.decay_every = 100;
  ConditionalGenerator generator(2, 1, 4, g);
  auto balanced_mmd = [&] {
    const auto [made, made_labels] = generate_images(generator, 2, 50, 3);
    at::NoGradGuard no_grad;
    return mmd_loss(target, rff_features(((made + 1) / 2).reshape({100, -1}), w), made_labels).item<double>();
  };
  const double before = balanced_mmd();
  std::int64_t reported = 0;
  fit_mmd_generator(generator, target, w, g, 1, [&](std::int64_t step, double) { reported = step; });
  EXPECT_EQ(reported, 300);
  const double after = balanced_mmd();
  EXPECT_LT(after, 0.2 * before) << before << " -> " << after;
  const auto [made, made_labels] = generate_images(generator, 2, 50, 3);
  ASSERT_EQ(made.sizes(), (std::vector<std::int64_t>{100, 1, 4, 4}));
  EXPECT_LE(made.abs().max().item<double>(), 1.0);
  EXPECT_EQ(made_labels.narrow(0, 0, 50).sum().item<std::int64_t>(), 0);
  EXPECT_LT(made.narrow(0, 0, 50).mean().item<double>(), -0.3);
  EXPECT_GT(made.narrow(0, 50, 50).mean().item<double>(), 0.3);
}
