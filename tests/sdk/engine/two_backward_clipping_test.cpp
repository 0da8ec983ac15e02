// The two-backward clipping (fast_gradient_clipping.hpp, ClipPasses::two) against the micro-batch
// oracle, and the taps it is built on: each recorded output hands its gradient to the session's
// sink during the backward (the gradient autograd would have returned), the layer returning the
// very tensor it recorded.
#include <privdiff/engine/capture.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/engine/per_example_rows.hpp>

#include "oracle_networks.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace privdiff::sdk::engine;
using namespace privdiff::testing::oracle;

namespace {

struct KeepingSink : OutputGradientSink {
  std::map<std::size_t, at::Tensor> gradients;
  int calls = 0;
  void on_output_gradient(std::size_t call, const at::Tensor& gradient) override {
    ++calls;
    gradients[call] = gradient.clone();
  }
};

// Forward: the identity. Backward: the gradient times 1 + 1e-3 x (the backward passes so far): a
// kernel whose replay does not give the first pass's numbers.
struct Drifting : torch::autograd::Function<Drifting> {
  static int passes;
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list g) {
    return {g[0] * (1 + 1e-3 * passes++)};
  }
};
int Drifting::passes = 0;

}  // namespace

// A tapped output is the tensor the layer returns, and the sink gets, once per backward, the
// gradient autograd::grad gives for it: for a convolution, a Linear on sequences (a view of its
// product, which the tap rebases), a GroupNorm and an Embedding, with outputs used twice.
TEST(OutputGradientTaps, HandTheSinkEachOutputsGradientAsAutogradComputesIt) {
  TinyUnet net;
  net.to(at::kDouble);
  const at::Tensor x = randn({3, 1, 8, 8});
  const RowLoss loss = make_loss(net, x, 1);
  const BackwardToOutputs reference = backward_to_layer_outputs(loss, 3, 1);

  const auto sink = std::make_shared<KeepingSink>();
  at::Tensor total, probe;
  std::vector<CapturedCall> calls;
  {
    CaptureSession session(sink);
    total = example_means(loss(at::arange(3, at::kLong)), 3, 1).sum();
    calls = session.calls();
    probe = session.probe();
  }
  ASSERT_EQ(calls.size(), reference.calls.size());
  for (int pass = 1; pass <= 2; ++pass) {
    (void)torch::autograd::grad({total}, {probe}, {}, /*retain_graph=*/pass == 1, false, /*allow_unused=*/true);
    EXPECT_EQ(sink->calls, pass * static_cast<int>(calls.size())) << "every tap once per backward";
    for (std::size_t c = 0; c < calls.size(); ++c) {
      ASSERT_TRUE(sink->gradients.count(c)) << c;
      EXPECT_TRUE(at::allclose(sink->gradients[c], reference.output_grads[c], 1e-12, 1e-12)) << "call " << c;
    }
  }
  // No weight gradient was formed along the way.
  for (const auto& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

// A graph that outlives its sink (a caller keeping the loss) passes gradients through, calling nothing.
TEST(OutputGradientTaps, AGraphOutlivingItsSinkStillRuns) {
  TinyUnet net;
  net.to(at::kDouble);
  const at::Tensor x = randn({2, 1, 8, 8});
  const RowLoss loss = make_loss(net, x, 1);
  at::Tensor total, probe;
  {
    CaptureSession session(std::make_shared<KeepingSink>());
    total = loss(at::arange(2, at::kLong)).sum();
    probe = session.probe();
  }  // the sink is gone
  (void)torch::autograd::grad({total}, {probe}, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
  const auto grads = torch::autograd::grad({total}, net.parameters(), {}, true, false, /*allow_unused=*/true);
  for (const auto& g : grads) EXPECT_TRUE(g.defined() && at::isfinite(g).all().item<bool>());
}

TEST(TwoBackwardClipping, EqualsClippingTheOraclesPerExampleGradients) {
  expect_fast_clipping_matches_oracle([] { return std::make_shared<TinyUnet>(); }, {0, 1, 8, 8}, ClipPasses::two);
}

// 40 examples: three slices of norms on a CPU. What pass 1 keeps (per-example gradients a strategy
// formed, within the budget) and what the replay sums add up to the oracle's clipped sum.
TEST(TwoBackwardClipping, SumsFromKeptGradientsAndFromTheReplayAddUp) {
  for (NormPlanner planner : every_norm_planner()) {
    auto net = std::make_shared<TinyUnet>();
    net->to(at::kDouble);
    const at::Tensor x = randn({40, 1, 8, 8});
    const RowLoss loss = make_loss(*net, x, 1);
    const auto reference = clip_and_sum(micro_batch_per_example_gradients(*net, loss, 40, 1), 0.05, ClipMode::flat);
    const auto two = clipped_gradient_sum_two_passes(*net, loss, 40, 1, 0.05, ClipMode::flat, planner);
    std::string what = "plan";
    for (const auto& [strategy, count] : planner.counts()) what += " " + strategy + " x" + std::to_string(count);
    expect_clipped_sums_equal(two, reference, what);
    for (const auto& s : two.sums) EXPECT_FALSE(s.requires_grad());
  }
}

// A weight used by two layers: its norm is that of the sum of both uses (never the per-use norms).
TEST(TwoBackwardClipping, TiedWeightsAreClippedOnTheSumOfTheirUses) {
  for (auto mode : {ClipMode::flat, ClipMode::per_layer}) {
    Net net;
    auto first = net.register_module("first", std::make_shared<Linear>(5, 5, true));
    auto second = std::make_shared<Linear>(5, 5, false);
    second->weight = first->weight;
    net.body = [first, second](const at::Tensor& x) { return second->forward(at::tanh(first->forward(x))); };
    net.to(at::kDouble);
    const at::Tensor x = randn({6, 5});
    const RowLoss loss = make_loss(net, x, 1);
    NormPlanner ghost(NormPlanner::Mode::fixed, NormStrategy::ghost);
    const auto two = clipped_gradient_sum_two_passes(net, loss, 6, 1, 0.05, mode, ghost);
    expect_clipped_sums_equal(two, clip_and_sum(micro_batch_per_example_gradients(net, loss, 6, 1), 0.05, mode),
                              mode == ClipMode::flat ? "flat" : "per layer");
  }
}

// A replay whose output gradients differ from the first pass's (a kernel that is not
// deterministic) would sum gradients whose norms were never clipped: it is an error.
TEST(TwoBackwardClipping, AReplayThatDiffersFromTheFirstPassIsAnError) {
  Net net;
  auto first = net.register_module("first", std::make_shared<Linear>(4, 6));
  auto second = net.register_module("second", std::make_shared<Linear>(6, 3));
  net.body = [first, second](const at::Tensor& x) {
    return second->forward(Drifting::apply(at::tanh(first->forward(x))));
  };
  net.to(at::kDouble);
  const at::Tensor x = randn({5, 4});
  const RowLoss loss = make_loss(net, x, 1);
  // Ghost norms keep nothing, so the first layer's sum comes from the replay.
  NormPlanner ghost(NormPlanner::Mode::fixed, NormStrategy::ghost);
  try {
    (void)clipped_gradient_sum_two_passes(net, loss, 5, 1, 0.05, ClipMode::flat, ghost);
    FAIL() << "the drifting replay was not caught";
  } catch (const ReplayMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("clip_passes = \"one\""), std::string::npos) << e.what();
  }
}

// The engine's plan carries the passes into every chunk (clipped_sum_along) and its description.
TEST(TwoBackwardClipping, ThePlanChoosesThePasses) {
  TinyUnet net;
  net.to(at::kDouble);
  const at::Tensor x = randn({4, 1, 8, 8});
  const RowLoss loss = make_loss(net, x, 1);
  NormPlanner planner(NormPlanner::Mode::fixed, NormStrategy::ghost);
  EnginePlan plan{EnginePath::vectorised, 4, {}, ClipPasses::two};
  const auto two = clipped_sum_along(plan, net, loss, 4, 1, 0.05, ClipMode::flat, planner);
  EXPECT_TRUE(two.seconds.count("forward")) << "the two-pass path's timings";
  expect_clipped_sums_equal(two, clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, 1), 0.05, ClipMode::flat),
                            "plan");
  EXPECT_EQ(plan.describe(planner).at("clip_passes"), "two");
  EXPECT_EQ(clip_passes_from_string("one"), ClipPasses::one);
  EXPECT_THROW(clip_passes_from_string("three"), std::invalid_argument);
}
