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

namespace {

// A Linear that notes, each time the engine asks it for norms, gradients or a clipped sum, whether
// TF32 products were allowed then.
struct Tf32Spy : Linear {
  using Linear::Linear;
  mutable std::vector<bool> allowed;
  void note() const {
    allowed.push_back(at::globalContext().allowTF32CuBLAS() || at::globalContext().allowTF32CuDNN());
  }
  std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& g, std::int64_t group) const override {
    note();
    return Linear::per_example(call, g, group);
  }
  std::vector<at::Tensor> per_example_squared_norms(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                                    NormStrategy strategy) const override {
    note();
    return Linear::per_example_squared_norms(call, g, group, strategy);
  }
  std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override {
    note();
    return Linear::scaled_sum(call, g, group, scales);
  }
};

}  // namespace

// LibTorch lets cuDNN use TF32 by default, and a user or a tf32 forward may allow it for cuBLAS. The
// norms and the clipped sums come from the same captured tensors by different kernels: taken with
// 10-bit products, an example's clipped contribution could exceed C by ~1e-3. The engine takes both
// with TF32 off, whatever the settings, and gives the settings back.
TEST(Precision, NormsAndClippedSumsAreTakenWithoutTf32) {
  auto& context = at::globalContext();
  const bool cublas = context.allowTF32CuBLAS(), cudnn = context.allowTF32CuDNN();
  context.setAllowTF32CuBLAS(true);
  context.setAllowTF32CuDNN(true);
  Net net;
  auto spy = net.register_module("spy", std::make_shared<Tf32Spy>(3, 2));
  net.body = [spy](const at::Tensor& x) { return spy->forward(x); };
  const at::Tensor x = at::randn({4, 5, 3});
  for (auto strategy : {NormStrategy::materialised, NormStrategy::ghost}) {
    NormPlanner planner(NormPlanner::Mode::fixed, strategy);
    clipped_gradient_sum(net, make_loss(net, x, 1), 4, 1, 1.0, ClipMode::flat, planner);
  }
  EXPECT_GE(spy->allowed.size(), 3u);
  for (std::size_t i = 0; i < spy->allowed.size(); ++i) EXPECT_FALSE(spy->allowed[i]) << "call " << i;
  EXPECT_TRUE(context.allowTF32CuBLAS());  // given back
  EXPECT_TRUE(context.allowTF32CuDNN());
  context.setAllowTF32CuBLAS(cublas);
  context.setAllowTF32CuDNN(cudnn);
}
