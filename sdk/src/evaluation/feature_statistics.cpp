#include <privdiff/evaluation/feature_statistics.hpp>

#include <ATen/ATen.h>

#include <Eigen/Eigenvalues>

#include <stdexcept>

namespace privdiff::sdk::evaluation {

namespace {

Eigen::MatrixXd to_eigen(const at::Tensor& matrix) {
  const at::Tensor m = matrix.to(at::kDouble).contiguous();
  Eigen::MatrixXd out(m.size(0), m.size(1));
  const auto a = m.accessor<double, 2>();
  for (std::int64_t i = 0; i < m.size(0); ++i) {
    for (std::int64_t j = 0; j < m.size(1); ++j) out(i, j) = a[i][j];
  }
  return out;
}

constexpr std::int64_t chunk = 1024;

/// Distance from each row of `points` to its k-th nearest other row.
at::Tensor kth_neighbour_radius(const at::Tensor& points, std::int64_t k) {
  std::vector<at::Tensor> radii;
  for (std::int64_t i = 0; i < points.size(0); i += chunk) {
    const at::Tensor d = at::cdist(points.narrow(0, i, std::min(chunk, points.size(0) - i)), points);
    // The smallest distance is the point to itself (0): the k-th neighbour is entry k.
    radii.push_back(std::get<0>(d.topk(k + 1, 1, /*largest=*/false, /*sorted=*/true)).select(1, k));
  }
  return at::cat(radii, 0);
}

/// Share of `queries` within radius[j] of some manifold point j.
double share_inside(const at::Tensor& queries, const at::Tensor& manifold, const at::Tensor& radius) {
  std::int64_t inside = 0;
  for (std::int64_t i = 0; i < queries.size(0); i += chunk) {
    const at::Tensor d = at::cdist(queries.narrow(0, i, std::min(chunk, queries.size(0) - i)), manifold);
    inside += d.le(radius.unsqueeze(0)).any(1).sum().item<std::int64_t>();
  }
  return static_cast<double>(inside) / static_cast<double>(queries.size(0));
}

}  // namespace

GaussianFit fit_gaussian(const at::Tensor& features) {
  if (features.dim() != 2 || features.size(0) < 2) throw std::invalid_argument("need at least 2 feature vectors");
  const at::Tensor x = features.to(at::kDouble);
  const at::Tensor mean = x.mean(0);
  const at::Tensor centred = x - mean;
  GaussianFit fit;
  fit.count = x.size(0);
  fit.mean = mean.contiguous();
  fit.covariance = (centred.t().mm(centred) / static_cast<double>(x.size(0) - 1)).contiguous();
  return fit;
}

double frechet_distance(const GaussianFit& a, const GaussianFit& b) {
  if (a.mean.numel() != b.mean.numel()) throw std::invalid_argument("feature dimensions differ");
  const Eigen::MatrixXd cov_a = to_eigen(a.covariance), cov_b = to_eigen(b.covariance);
  const Eigen::VectorXd mean_a = to_eigen(a.mean.unsqueeze(1)).col(0), mean_b = to_eigen(b.mean.unsqueeze(1)).col(0);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> sa(cov_a);
  const Eigen::VectorXd root = sa.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  const Eigen::MatrixXd sqrt_a = sa.eigenvectors() * root.asDiagonal() * sa.eigenvectors().transpose();
  const Eigen::MatrixXd middle = sqrt_a * cov_b * sqrt_a;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> sm(0.5 * (middle + middle.transpose()), Eigen::EigenvaluesOnly);
  const double trace_sqrt = sm.eigenvalues().cwiseMax(0.0).cwiseSqrt().sum();
  const double d = (mean_a - mean_b).squaredNorm() + cov_a.trace() + cov_b.trace() - 2 * trace_sqrt;
  return std::max(0.0, d);
}

double half_split_frechet_distance(const at::Tensor& features) {
  const std::int64_t m = features.size(0);
  const at::Tensor even = features.index_select(0, at::arange(0, m, 2, at::kLong));
  const at::Tensor odd = features.index_select(0, at::arange(1, m, 2, at::kLong));
  return frechet_distance(fit_gaussian(even), fit_gaussian(odd));
}

PrecisionRecall precision_recall(const at::Tensor& real, const at::Tensor& generated, std::int64_t k) {
  if (real.size(0) <= k || generated.size(0) <= k) {
    throw std::invalid_argument("precision/recall needs more than k = " + std::to_string(k) + " samples in each set");
  }
  const at::Tensor r = real.to(at::kFloat), g = generated.to(at::kFloat);
  PrecisionRecall out;
  out.precision = share_inside(g, r, kth_neighbour_radius(r, k));
  out.recall = share_inside(r, g, kth_neighbour_radius(g, k));
  return out;
}

}  // namespace privdiff::sdk::evaluation
