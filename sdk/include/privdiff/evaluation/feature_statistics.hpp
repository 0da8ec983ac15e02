#pragma once
/// @file
/// Distribution distances on feature vectors: the Fréchet distance between Gaussian fits (the
/// formula of FID; it is *Inception* FID only on Inception-V3 pool3 features, see inception_v3.hpp)
/// and k-NN precision/recall (Kynkäänniemi et al. 2019).

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::evaluation {

struct GaussianFit {
  at::Tensor mean;        ///< float64 [F]
  at::Tensor covariance;  ///< float64 [F, F], unbiased (N - 1), as numpy's np.cov
  std::int64_t count = 0;
};

/// Mean and covariance of features [N, F] (N >= 2), in double precision.
PRIVDIFF_SDK_API GaussianFit fit_gaussian(const at::Tensor& features);

/// |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2), through symmetric eigensolvers
/// (no complex matrix square roots; tiny negative eigenvalues from round-off are clamped to 0).
/// Equal to pytorch-fid's sqrtm(S_a S_b) form: the two products have the same eigenvalues.
PRIVDIFF_SDK_API double frechet_distance(const GaussianFit& a, const GaussianFit& b);

/// The Fréchet distance between the even and the odd rows of features [N, F]: what two halves of
/// one real set score, the floor a distance to that set is read against.
PRIVDIFF_SDK_API double half_split_frechet_distance(const at::Tensor& features);

struct PrecisionRecall {
  double precision = 0;  ///< share of generated samples inside the real k-NN manifold
  double recall = 0;     ///< share of real samples inside the generated k-NN manifold
};

/// k-NN manifold estimate: a point is inside a set's manifold when it lies within the distance
/// from some set member to that member's k-th nearest neighbour (k = 3 in the paper).
PRIVDIFF_SDK_API PrecisionRecall precision_recall(const at::Tensor& real, const at::Tensor& generated,
                                                  std::int64_t k = 3);

}  // namespace privdiff::sdk::evaluation
