// Vectorised per-example gradients against the micro-batch oracle (one example at a time through
// autograd), in float64, for every layer type and the stride/padding/dilation/groups variants UNets
// use, for a small UNet-shaped network with GroupNorm and self-attention, and for grouped rows
// (noise multiplicity K > 1), where each example's gradient is that of its K-averaged loss.
#include <privdiff/diffusion/spatial_transformer.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include "oracle_networks.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <functional>
#include <map>
#include <string>

using namespace privdiff::sdk::engine;
using namespace privdiff::testing::oracle;

TEST(PerExampleGradients, Linear) {
  Net net;
  auto lin = net.register_module("lin", std::make_shared<Linear>(5, 3));
  net.body = [lin](const at::Tensor& x) { return lin->forward(x); };
  expect_matches_oracle(net, randn({6, 5}));
}

TEST(PerExampleGradients, LinearOnSequences) {
  Net net;
  auto lin = net.register_module("lin", std::make_shared<Linear>(4, 6));
  auto out = net.register_module("out", std::make_shared<Linear>(6, 2, false));
  net.body = [lin, out](const at::Tensor& x) { return out->forward(at::tanh(lin->forward(x))); };
  expect_matches_oracle(net, randn({5, 7, 4}));
}

struct ConvCase {
  std::array<std::int64_t, 2> kernel, stride, padding, dilation;
  std::int64_t groups, in, out;
};

class PerExampleConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(PerExampleConv, MatchesOracle) {
  const ConvCase c = GetParam();
  Net net;
  Conv2dOptions o{c.in, c.out, c.kernel, c.stride, c.padding, c.dilation, c.groups, true};
  auto conv = net.register_module("conv", std::make_shared<Conv2d>(o));
  net.body = [conv](const at::Tensor& x) { return conv->forward(x); };
  expect_matches_oracle(net, randn({4, c.in, 9, 8}));
  // Each norm strategy (materialised, ghost, grouped convolution, gradient filter) gives the oracle's
  // norms, K = 1 and 3.
  for (std::int64_t group : {1, 3}) {
    const at::Tensor x = randn({4 * group, c.in, 9, 8});
    const RowLoss loss = make_loss(net, x, group);
    const auto reference = clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, group), 1e-3, ClipMode::flat);
    for (auto strategy : {NormStrategy::materialised, NormStrategy::ghost, NormStrategy::grouped_convolution,
                          NormStrategy::gradient_filter}) {
      NormPlanner planner(NormPlanner::Mode::fixed, strategy);
      const auto fast = clipped_gradient_sum(net, loss, 4, group, 1e-3, ClipMode::flat, planner);
      // The gradient filter is for ungrouped convolutions: grouped ones fall back to the cost model.
      if (strategy != NormStrategy::gradient_filter || c.groups == 1) {
        EXPECT_EQ(planner.counts(), (std::map<std::string, int>{{to_string(strategy), 1}}));
      }
      expect_clipped_sums_equal(fast, reference, to_string(strategy) + ", K " + std::to_string(group));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, PerExampleConv,
    ::testing::Values(ConvCase{{3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 3, 4},   // UNet 3x3 "same"
                      ConvCase{{3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, 4, 6},   // strided downsampling
                      ConvCase{{1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, 5, 3},   // 1x1 / NIN
                      ConvCase{{3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, 2, 3},   // dilation
                      ConvCase{{3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, 4, 6},   // groups
                      ConvCase{{3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, 4, 4},   // depthwise
                      ConvCase{{2, 3}, {2, 1}, {0, 1}, {1, 1}, 1, 3, 2})); // non-square, no padding

TEST(PerExampleGradients, GroupNorm) {
  Net net;
  auto conv = net.register_module("conv", std::make_shared<Conv2d>(Conv2dOptions{2, 6, {3, 3}, {1, 1}, {1, 1}}));
  auto norm = net.register_module("norm", std::make_shared<GroupNorm>(3, 6));
  net.body = [conv, norm](const at::Tensor& x) { return norm->forward(conv->forward(x)); };
  expect_matches_oracle(net, randn({5, 2, 6, 6}));
}

TEST(PerExampleGradients, LayerNorm) {
  Net net;
  auto lin = net.register_module("lin", std::make_shared<Linear>(4, 8));
  auto norm = net.register_module("norm", std::make_shared<LayerNorm>(8));
  net.body = [lin, norm](const at::Tensor& x) { return norm->forward(lin->forward(x)); };
  expect_matches_oracle(net, randn({5, 3, 4}));
}

TEST(PerExampleGradients, Embedding) {
  Net net;
  auto emb = net.register_module("emb", std::make_shared<Embedding>(7, 4));
  auto lin = net.register_module("lin", std::make_shared<Linear>(4, 3));
  const at::Tensor tokens = at::randint(0, 7, {6, 5}, at::kLong);
  net.body = [emb, lin, tokens](const at::Tensor& rows) {
    return lin->forward(at::tanh(emb->forward(tokens.index_select(0, rows.to(at::kLong).flatten()))));
  };
  // Inputs are row ids here, so the loss can select rows of `tokens`.
  expect_matches_oracle(net, at::arange(6, at::kLong).to(at::kDouble));
}


TEST(PerExampleGradients, UnetShapedNetworkWithGroupNormAndSelfAttention) {
  TinyUnet net;
  expect_matches_oracle(net, randn({4, 1, 8, 8}));
}

// LDM's transformer block (what DP-LDM fine-tunes): self- and cross-attention with two heads, GEGLU,
// LayerNorms, GroupNorm; the context tokens are a function of each example. Random weights
// everywhere (proj_out starts at zero, which would hide every gradient behind it).
struct TransformerNet : Net {
  std::shared_ptr<privdiff::sdk::diffusion::SpatialTransformer> block;
  std::shared_ptr<Linear> context;
  TransformerNet() {
    block = register_module("block", std::make_shared<privdiff::sdk::diffusion::SpatialTransformer>(
                                         privdiff::sdk::diffusion::SpatialTransformerConfig{8, 2, 3, 1, 5}));
    context = register_module("context", std::make_shared<Linear>(8, 10));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.copy_(at::randn(p.sizes(), gen, p.options()) * 0.4);
    body = [this](const at::Tensor& x) {
      const at::Tensor tokens = context->forward(x.mean({2, 3})).reshape({x.size(0), 2, 5});  // [N, 2, 5]
      return block->forward(x, tokens);
    };
  }
};

TEST(PerExampleGradients, SpatialTransformerWithCrossAttentionAndGeglu) {
  TransformerNet net;
  expect_matches_oracle(net, randn({4, 8, 3, 3}));
  expect_matches_oracle(net, randn({3 * 2, 8, 3, 3}), /*group=*/2);  // K = 2
  EXPECT_EQ(net.block->forward(randn({2, 8, 3, 3}), randn({2, 2, 5})).sizes(),
            (std::vector<std::int64_t>{2, 8, 3, 3}));
}

// DP-LDM's latent UNet: residual blocks and SpatialTransformers cross-attending to the class
// embedding, at both levels and in the middle (random weights: the transformers' zero-initialised
// output projections would hide every gradient behind them).
struct TransformerUnetNet : Net {
  std::shared_ptr<privdiff::sdk::diffusion::Unet> unet;
  TransformerUnetNet() {
    privdiff::sdk::diffusion::UnetConfig c{3, 4, 8, {1, 2}, 1, {4, 2}, 0.0, 3};
    c.transformer_heads = 2;
    c.transformer_head_dim = 4;
    c.context_dim = 6;
    unet = register_module("unet", std::make_shared<privdiff::sdk::diffusion::Unet>(c));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.copy_(at::randn(p.sizes(), gen, p.options()) * 0.3);
    // One context token: the cross-attention weights are softmax over one key = 1, so its query and
    // key projections, and the LayerNorm in front of it, get no gradient at all (in LDM's
    // class-conditional models too). Frozen here so that the comparison covers what learns.
    for (auto& p : named_parameters()) {
      const auto& name = p.key();
      if (name.find("attn2.to_q") != std::string::npos || name.find("attn2.to_k") != std::string::npos ||
          (name.find("norm2.") != std::string::npos && name.find("_attn") != std::string::npos)) {
        p.value().set_requires_grad(false);
      }
    }
    body = [this](const at::Tensor& x) {
      const at::Tensor labels = (x.flatten(1).sum(1).abs() * 3).floor().remainder(4).to(at::kLong);  // 3 = no label
      return unet->forward(x, x.flatten(1).mean(1), labels);
    };
  }
};

TEST(PerExampleGradients, TransformerUnetOfLatentDiffusion) {
  TransformerUnetNet net;
  expect_matches_oracle(net, randn({3, 3, 4, 4}));
  expect_matches_oracle(net, randn({2 * 2, 3, 4, 4}), /*group=*/2);
  int attention = 0, conditioning = 0;
  for (const auto& info : net.unet->parameters_with_roles()) {
    if (info.name.find("attn2.to_k") != std::string::npos) {
      EXPECT_EQ(info.role, "attention") << info.name;
    }
    attention += info.role == "attention";
    conditioning += info.role == "conditioning";
  }
  EXPECT_GT(attention, 0);
  EXPECT_EQ(conditioning, 1);  // the class embedder, which DP-LDM fine-tunes with the transformers
  privdiff::sdk::diffusion::UnetConfig unconditional{3, 4, 8, {1, 2}, 1, {4}, 0.0, 0};
  unconditional.transformer_heads = 2;
  EXPECT_THROW(privdiff::sdk::diffusion::Unet{unconditional}, std::invalid_argument);
}

TEST(PerExampleGradients, ANewSpatialTransformerIsTheIdentity) {
  privdiff::sdk::diffusion::SpatialTransformer block({8, 2, 4, 2, 6});
  block.to(at::kDouble);
  const at::Tensor x = randn({2, 8, 4, 4});
  EXPECT_TRUE(at::equal(block.forward(x, randn({2, 3, 6})), x));
}

TEST(PerExampleGradients, GroupedRowsGiveTheGradientOfEachExamplesAveragedLoss) {
  TinyUnet net;
  expect_matches_oracle(net, randn({3 * 4, 1, 8, 8}), /*group=*/4);  // 3 examples x K = 4
  Net lin_net;
  auto lin = lin_net.register_module("lin", std::make_shared<Linear>(5, 3));
  lin_net.body = [lin](const at::Tensor& x) { return lin->forward(x); };
  expect_matches_oracle(lin_net, randn({2 * 8, 5}), /*group=*/8);
}

TEST(PerExampleGradients, FrozenParametersCostNothingAndAreLeftOut) {
  TinyUnet net;
  net.in->weight.set_requires_grad(false);
  net.in->bias.set_requires_grad(false);
  for (auto& p : net.qkv->parameters()) p.set_requires_grad(false);
  net.to(at::kDouble);
  const at::Tensor x = randn({3, 1, 8, 8});
  const auto g = per_example_gradients(net, make_loss(net, x, 1), 3);
  EXPECT_EQ(g.params.size(), trainable_parameters(net).size());
  for (const auto& p : g.params) EXPECT_TRUE(p.requires_grad());
  expect_matches_oracle(net, x);
}

TEST(PerExampleGradients, ModulesWithoutClosedFormFallBackToTheOracle) {
  Net net;
  auto plain = net.register_module("plain", torch::nn::Linear(4, 2));
  net.body = [plain](const at::Tensor& x) { return plain->forward(x); };
  EXPECT_FALSE(has_closed_form(net));
  expect_matches_oracle(net, randn({3, 4}));
}

TEST(PerExampleGradients, RejectsInPlaceChangesOfLayerOutputsAndWrongLossSizes) {
  Net net;
  auto lin = net.register_module("lin", std::make_shared<Linear>(3, 3));
  net.body = [lin](const at::Tensor& x) {
    at::Tensor y = lin->forward(x);
    y.mul_(2);
    return y;
  };
  net.to(at::kDouble);
  const at::Tensor x = randn({2, 3});
  EXPECT_THROW(per_example_gradients(net, [&](const at::Tensor& e) { return net.forward(x.index_select(0, e)).sum(1); }, 2),
               std::invalid_argument);
  net.body = [lin](const at::Tensor& x) { return lin->forward(x); };
  EXPECT_THROW(per_example_gradients(net, [&](const at::Tensor&) { return net.forward(x).sum(); }, 2),
               std::invalid_argument);
}

TEST(PerExampleGradients, EmptyBatch) {
  Net net;
  auto lin = net.register_module("lin", std::make_shared<Linear>(3, 2));
  net.body = [lin](const at::Tensor& x) { return lin->forward(x); };
  const auto g = per_example_gradients(net, [](const at::Tensor&) { return at::zeros({0}); }, 0);
  ASSERT_EQ(g.grads.size(), 2u);
  EXPECT_EQ(g.grads[0].size(0), 0);
}


TEST(FastGradientClipping, EqualsClippingTheOraclesPerExampleGradients) {
  expect_fast_clipping_matches_oracle([] { return std::make_shared<TinyUnet>(); }, {0, 1, 8, 8});
  // DP-LDM's fine-tuned block
  expect_fast_clipping_matches_oracle([] { return std::make_shared<TransformerNet>(); }, {0, 8, 3, 3});
}

// 40 examples are three slices of fast gradient clipping. A calibrating planner times the first
// slice's strategies and keeps no gradients there, so that slice's sums come from the weight-gradient
// kernel with the other slices' examples masked out, while the next two slices' sums come from their
// kept per-example gradients; a forced strategy keeps every slice's. Both add up to the oracle's sum.
TEST(FastGradientClipping, SumsFromKeptGradientsAndFromTheKernelAddUp) {
  for (NormPlanner planner : {NormPlanner(NormPlanner::Mode::calibrate),
                              NormPlanner(NormPlanner::Mode::fixed, NormStrategy::grouped_convolution),
                              NormPlanner(NormPlanner::Mode::fixed, NormStrategy::gradient_filter),
                              NormPlanner(NormPlanner::Mode::fixed, NormStrategy::materialised)}) {
    auto net = std::make_shared<TinyUnet>();
    net->to(at::kDouble);
    const at::Tensor x = randn({40, 1, 8, 8});
    const RowLoss loss = make_loss(*net, x, 1);
    const auto reference = clip_and_sum(micro_batch_per_example_gradients(*net, loss, 40, 1), 0.05, ClipMode::flat);
    const auto fast = clipped_gradient_sum(*net, loss, 40, 1, 0.05, ClipMode::flat, planner);
    std::string what = "plan";
    for (const auto& [strategy, count] : planner.counts()) what += " " + strategy + " x" + std::to_string(count);
    expect_clipped_sums_equal(fast, reference, what);
  }
}

// A weight shared by two layers (tied weights, as LoRA, LDMs and plugin authors create): its
// per-example gradient is the sum of both uses, and clipping must bound the norm of that sum —
// not the root of the summed squared norms of each use (which under-clips).
TEST(FastGradientClipping, TiedWeightsAreClippedOnTheSumOfTheirUses) {
  for (auto mode : {ClipMode::flat, ClipMode::per_layer}) {
    Net net;
    auto first = net.register_module("first", std::make_shared<Linear>(5, 5, true));
    auto second = std::make_shared<Linear>(5, 5, false);  // not registered: it only borrows the weight
    second->weight = first->weight;
    net.body = [first, second](const at::Tensor& x) { return second->forward(at::tanh(first->forward(x))); };
    net.to(at::kDouble);  // (in place: both layers still hold the one weight)
    const at::Tensor x = randn({6, 5});
    const RowLoss loss = make_loss(net, x, 1);
    const double c = 0.05;
    NormPlanner ghost(NormPlanner::Mode::fixed, NormStrategy::ghost);  // never used on the sum of two uses
    const auto fast = clipped_gradient_sum(net, loss, 6, 1, c, mode, ghost);
    const auto oracle = micro_batch_per_example_gradients(net, loss, 6, 1);
    const auto reference = clip_and_sum(oracle, c, mode);
    ASSERT_EQ(fast.sums.size(), 2u);  // the shared weight is one parameter
    EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0));
    EXPECT_LT(reference.factors.max().item<double>(), 1.0);  // every example was clipped
    for (std::size_t j = 0; j < fast.sums.size(); ++j) {
      const double scale = reference.sums[j].abs().max().item<double>() + 1e-30;
      EXPECT_LT((fast.sums[j] - reference.sums[j]).abs().max().item<double>() / scale, 1e-6) << j;
    }
    // Every clipped per-example gradient (oracle gradients times fast's factors) has norm <= C.
    at::Tensor squared = at::zeros({6}, at::kDouble);
    for (std::size_t j = 0; j < oracle.grads.size(); ++j) {
      const at::Tensor factor = mode == ClipMode::flat ? fast.factors : fast.factors.select(1, static_cast<std::int64_t>(j));
      squared += (oracle.grads[j].reshape({6, -1}) * factor.unsqueeze(1)).pow(2).sum(1);
    }
    EXPECT_LE(squared.sqrt().max().item<double>(), c * (1 + 1e-9));
  }
}

// The results are values, detached from the chunk's autograd graph: a logical step adds up many
// chunks, and graph-attached sums would keep every chunk's activations alive (memory growing
// with the logical batch instead of the physical one).
TEST(FastGradientClipping, ResultsAreDetachedFromTheChunksGraph) {
  TinyUnet net;
  net.to(at::kDouble);
  const at::Tensor x = randn({3, 1, 8, 8});
  const RowLoss loss = make_loss(net, x, 1);
  const auto fast = clipped_gradient_sum(net, loss, 3, 1, 0.05, ClipMode::flat);
  EXPECT_FALSE(fast.norms.requires_grad());
  EXPECT_FALSE(fast.factors.requires_grad());
  for (const auto& s : fast.sums) EXPECT_FALSE(s.requires_grad());
  for (const auto& g : per_example_gradients(net, loss, 3, 1).grads) EXPECT_FALSE(g.requires_grad());
}
