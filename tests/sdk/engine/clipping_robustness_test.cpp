// Clipping holds for every input, not only for typical ones (issue 36, finding 4): ghost norms in
// float32 where an example's positions cancel, and examples whose gradients are not finite. The
// reference is the example's gradient formed in float64 from the same float32 values.
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include "oracle_networks.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace privdiff::sdk::engine;
using privdiff::testing::oracle::Net;

namespace {

constexpr std::int64_t in_features = 64, out_features = 8;

// A Linear over two positions whose inputs differ by `eps` and whose loss weights are opposite:
// the example's weight gradient u (a_1 - a_2)^T is tiny against each position's term.
struct Cancelling {
  Net net;
  std::shared_ptr<Linear> lin;
  at::Tensor x;  // [B, 2, D], float32
  at::Tensor u;  // [out], the output gradient at position 1 (minus it at position 2)

  Cancelling(double eps, std::int64_t examples) {
    lin = net.register_module("lin", std::make_shared<Linear>(in_features, out_features, false));
    net.body = [this](const at::Tensor& input) { return lin->forward(input); };
    at::manual_seed(3);
    const at::Tensor v = 100 * at::randn({examples, 1, in_features});
    const at::Tensor w = at::randn({examples, 1, in_features});
    x = at::cat({v, v + eps * w}, 1);
    u = at::randn({out_features});
  }
  RowLoss loss() {
    return [this](const at::Tensor& examples) {
      const at::Tensor out = net.forward(x.index_select(0, examples));  // [b, 2, out]
      const at::Tensor weights = at::stack({u, -u});                     // [2, out]
      return (out * weights).sum({1, 2});
    };
  }
  // Each example's true gradient norm: ||u|| ||a_1 - a_2||, in float64 from the float32 inputs.
  at::Tensor true_norms() const {
    const at::Tensor a = x.to(at::kDouble);
    const at::Tensor diff = a.select(1, 0) - a.select(1, 1);
    return at::linalg_vector_norm(diff, 2, {1}) * at::linalg_vector_norm(u.to(at::kDouble), 2);
  }
};

// The norm of each example's clipped contribution, from the factors and the true gradient.
double largest_clipped_norm(const ClippedSum& clipped, const at::Tensor& true_norms) {
  return (clipped.factors * true_norms).max().item<double>();
}

}  // namespace

TEST(ClippingRobustness, GhostNormsAreExactWhenPositionsCancelInFloat32) {
  for (const double eps : {1e-3, 1e-5}) {
    Cancelling c(eps, 6);
    const at::Tensor truth = c.true_norms();
    const double clip = 0.5 * truth.min().item<double>();  // every example must be clipped
    NormPlanner ghost(NormPlanner::Mode::fixed, NormStrategy::ghost);
    const auto fast = clipped_gradient_sum(c.net, c.loss(), 6, 1, clip, ClipMode::flat, ghost);
    ASSERT_EQ(ghost.counts().count("ghost"), 1u) << "the ghost strategy was not used";
    EXPECT_TRUE(at::isfinite(fast.norms).all().item<bool>()) << eps;
    const double worst = ((fast.norms - truth).abs() / truth).max().item<double>();
    EXPECT_LT(worst, 1e-4) << "eps " << eps << ": reported/true norm off by " << worst;
    // Realised sensitivity: every clipped contribution within C (float32 inputs: 1e-4 relative).
    EXPECT_LE(largest_clipped_norm(fast, truth), clip * (1 + 1e-4)) << eps;
    for (const auto& s : fast.sums) EXPECT_TRUE(at::isfinite(s).all().item<bool>()) << eps;
  }
}

TEST(ClippingRobustness, NegativeSquaredNormsFromRoundingCountAsZero) {
  const at::Tensor squared = at::tensor({-1e-20, 4.0, -3.0}, at::kDouble).reshape({3, 1});
  const at::Tensor f = clip_factors(squared, 1.0, ClipMode::flat);
  EXPECT_TRUE(at::isfinite(f).all().item<bool>());
  EXPECT_DOUBLE_EQ(f[0].item<double>(), 1.0);
  EXPECT_NEAR(f[1].item<double>(), 0.5, 1e-6);
  EXPECT_DOUBLE_EQ(f[2].item<double>(), 1.0);
}

// An example whose gradient is not finite contributes nothing, on every path; the others are summed
// as if it were not there, and nothing NaN reaches the sum.
TEST(ClippingRobustness, AnExampleWithANonFiniteGradientContributesNothing) {
  for (const double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    Cancelling c(0.5, 5);
    Cancelling clean(0.5, 5);
    c.x[2].fill_(bad);
    clean.x[2].zero_();  // the same data with the bad example's gradient zero
    const double clip = 1.0;
    for (auto mode : {ClipMode::flat, ClipMode::per_layer}) {
      const auto reference = clipped_gradient_sum(clean.net, clean.loss(), 5, 1, clip, mode);
      for (int path = 0; path < 6; ++path) {
        NormPlanner ghost(NormPlanner::Mode::fixed, NormStrategy::ghost);
        // Materialised norms keep the per-example gradients and sum them with the clip factors:
        // the bad example's rows must be zeroed there too, not multiplied by 0.
        NormPlanner materialised(NormPlanner::Mode::fixed, NormStrategy::materialised);
        const ClippedSum got =
            path == 0   ? clipped_gradient_sum(c.net, c.loss(), 5, 1, clip, mode, ghost)
            : path == 1 ? clip_and_sum(per_example_gradients(c.net, c.loss(), 5, 1), clip, mode)
            : path == 2 ? micro_batch_clipped_sum(c.net, c.loss(), 5, 1, clip, mode)
            : path == 3 ? clipped_gradient_sum(c.net, c.loss(), 5, 1, clip, mode, materialised)
            // Two backward passes: the replay's sums read the bad example's rows zeroed, and the
            // kept gradients (materialised) are summed with those rows zeroed too.
            : path == 4 ? clipped_gradient_sum_two_passes(c.net, c.loss(), 5, 1, clip, mode, ghost)
                        : clipped_gradient_sum_two_passes(c.net, c.loss(), 5, 1, clip, mode, materialised);
        const at::Tensor factor = mode == ClipMode::flat ? got.factors[2] : got.factors[2].max();
        EXPECT_EQ(factor.item<double>(), 0.0) << "path " << path;
        ASSERT_EQ(got.sums.size(), reference.sums.size());
        for (std::size_t j = 0; j < got.sums.size(); ++j) {
          ASSERT_TRUE(at::isfinite(got.sums[j]).all().item<bool>()) << "path " << path << " bad " << bad;
          EXPECT_TRUE(at::allclose(got.sums[j], reference.sums[j], 1e-4, 1e-4)) << "path " << path;
        }
      }
    }
  }
}
