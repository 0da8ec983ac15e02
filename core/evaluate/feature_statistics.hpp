#pragma once
// Distribution distances on feature vectors: the Fréchet distance between Gaussian fits (the
// formula of FID; the features here are our own classifier's, so the numbers are not Inception
// FID) and k-NN precision/recall (Kynkäänniemi et al. 2019).

#include <ATen/core/Tensor.h>

#include <Eigen/Core>

#include <cstdint>

namespace privdiff::core {

struct GaussianFit {
  Eigen::VectorXd mean;
  Eigen::MatrixXd covariance;  ///< unbiased (N - 1)
  std::int64_t count = 0;
};

/// Mean and covariance of features [N, F] (N >= 2), in double precision.
GaussianFit fit_gaussian(const at::Tensor& features);

/// |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2), through symmetric eigensolvers
/// (no complex matrix square roots; tiny negative eigenvalues from round-off are clamped to 0).
double frechet_distance(const GaussianFit& a, const GaussianFit& b);

struct PrecisionRecall {
  double precision = 0;  ///< share of generated samples inside the real k-NN manifold
  double recall = 0;     ///< share of real samples inside the generated k-NN manifold
};

/// k-NN manifold estimate: a point is inside a set's manifold when it lies within the distance
/// from some set member to that member's k-th nearest neighbour (k = 3 in the paper).
PrecisionRecall precision_recall(const at::Tensor& real, const at::Tensor& generated, std::int64_t k = 3);

}  // namespace privdiff::core
