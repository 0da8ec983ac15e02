// Mixed precision (precision.hpp): the scope sets and restores autocast, and a bf16 forward leaves
// the privacy-critical part in float32 — what the layers captured is cast back before norms are
// taken, the clipped sums come out in the parameters' dtype, and they equal clipping the micro-batch
// oracle's gradients of the same bf16 forward (to bf16's precision).
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/precision.hpp>

#include "oracle_networks.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

using namespace privdiff::sdk::engine;
using namespace privdiff::testing::oracle;

TEST(Precision, ScopesSetAndRestoreAutocast) {
  const c10::Device cpu(c10::kCPU);
  ASSERT_FALSE(at::autocast::is_cpu_enabled());
  {
    PrecisionScope outer(Precision::bf16, cpu);
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
    EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), at::kBFloat16);
    {
      PrecisionScope inner(Precision::float32, cpu);  // float32 changes nothing
      EXPECT_TRUE(at::autocast::is_cpu_enabled());
    }
    EXPECT_EQ(at::mm(at::ones({2, 2}), at::ones({2, 2})).scalar_type(), at::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
  { PrecisionScope tf32(Precision::tf32, cpu); }  // no effect without CUDA
  EXPECT_EQ(precision_from_string("bf16"), Precision::bf16);
  EXPECT_EQ(to_string(Precision::tf32), "tf32");
  EXPECT_THROW(precision_from_string("fp8"), std::invalid_argument);
}

TEST(Precision, ABf16ForwardIsClippedInFloat32) {
  TinyUnet net;  // float32
  const at::Tensor x = at::randn({4, 1, 8, 8});
  const RowLoss plain = make_loss(net, x, 1);
  const RowLoss loss = [&](const at::Tensor& examples) {
    PrecisionScope bf16(Precision::bf16, c10::Device(c10::kCPU));
    return plain(examples);
  };

  const auto fast = clipped_gradient_sum(net, loss, 4, 1, 0.05, ClipMode::flat);
  const auto reference = clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, 1), 0.05, ClipMode::flat);
  ASSERT_EQ(fast.sums.size(), reference.sums.size());
  EXPECT_EQ(fast.norms.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 3e-2, 0)) << fast.norms << reference.norms;
  for (std::size_t j = 0; j < fast.sums.size(); ++j) {
    EXPECT_EQ(fast.sums[j].scalar_type(), at::kFloat) << j;
    const double scale = reference.sums[j].abs().max().item<double>() + 1e-30;
    EXPECT_LT((fast.sums[j] - reference.sums[j]).abs().max().item<double>() / scale, 0.1) << j;
  }
  // The bf16 forward really ran in bf16: its norms differ from a float32 forward's.
  const auto float32 = clipped_gradient_sum(net, plain, 4, 1, 0.05, ClipMode::flat);
  EXPECT_FALSE(at::allclose(fast.norms, float32.norms, 1e-6, 0));
}
