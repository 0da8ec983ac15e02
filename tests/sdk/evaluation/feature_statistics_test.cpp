// The SDK's distribution distances: Fréchet distance against closed forms, Gaussian fits of
// samples, k-NN precision/recall on sets with known answers.
#include <privdiff/evaluation/feature_statistics.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <vector>

using namespace privdiff::sdk::evaluation;

namespace {

GaussianFit fit(at::Tensor mean, at::Tensor covariance) {
  GaussianFit f;
  f.mean = std::move(mean);
  f.covariance = std::move(covariance);
  return f;
}

at::Tensor vec(std::vector<double> values) { return at::tensor(values, at::kDouble); }

}  // namespace

TEST(FrechetDistance, ZeroForEqualGaussians) {
  const at::Tensor a = at::rand({6, 6}, at::kDouble);
  const at::Tensor cov = a.mm(a.t()) + at::eye(6, at::kDouble);
  EXPECT_NEAR(frechet_distance(fit(at::ones({6}, at::kDouble), cov), fit(at::ones({6}, at::kDouble), cov)), 0.0, 1e-9);
}

TEST(FrechetDistance, MatchesClosedFormForCommutingCovariances) {
  // Diagonal covariances: d = |m1 - m2|^2 + sum (sqrt(a_i) - sqrt(b_i))^2.
  const at::Tensor a = vec({1, 4, 9}), b = vec({4, 1, 0.25}), m1 = vec({0, 1, 2}), m2 = vec({1, 1, 0});
  const double expected = 1 + 0 + 4 + (1 - 2) * (1 - 2) + (2 - 1) * (2 - 1) + (3 - 0.5) * (3 - 0.5);
  EXPECT_NEAR(frechet_distance(fit(m1, at::diag(a)), fit(m2, at::diag(b))), expected, 1e-9);
  // Symmetric in its arguments even for non-commuting covariances.
  const at::Tensor r = at::rand({4, 4}, at::kDouble), s = at::rand({4, 4}, at::kDouble);
  const GaussianFit x = fit(at::zeros({4}, at::kDouble), r.mm(r.t())), y = fit(at::ones({4}, at::kDouble), s.mm(s.t()));
  EXPECT_NEAR(frechet_distance(x, y), frechet_distance(y, x), 1e-8);
}

TEST(FrechetDistance, GaussianFitOfSamples) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor x = at::randn({20000, 3}, g, at::kDouble) * 2 + 1;
  const GaussianFit f = fit_gaussian(x);
  EXPECT_NEAR(f.mean[0].item<double>(), 1.0, 0.05);
  EXPECT_NEAR(f.covariance[1][1].item<double>(), 4.0, 0.15);
  EXPECT_NEAR(f.covariance[0][1].item<double>(), 0.0, 0.1);
}

TEST(PrecisionRecall, ASetAgainstItselfIsOne) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(2);
  const at::Tensor x = at::randn({500, 8}, g);
  const PrecisionRecall pr = precision_recall(x, x);
  EXPECT_DOUBLE_EQ(pr.precision, 1.0);
  EXPECT_DOUBLE_EQ(pr.recall, 1.0);
}

TEST(PrecisionRecall, FarApartSetsAreZeroAndACollapsedSetHasNoRecall) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor real = at::randn({400, 4}, g);
  const PrecisionRecall far = precision_recall(real, at::randn({400, 4}, g) + 100);
  EXPECT_EQ(far.precision, 0.0);
  EXPECT_EQ(far.recall, 0.0);
  // Mode collapse: every generated point near the mean is precise but covers little of the data.
  const PrecisionRecall collapsed = precision_recall(real, at::randn({400, 4}, g) * 0.01);
  EXPECT_GT(collapsed.precision, 0.99);
  EXPECT_LT(collapsed.recall, 0.2);
}

