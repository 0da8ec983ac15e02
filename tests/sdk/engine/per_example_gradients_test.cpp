// Vectorised per-example gradients against the micro-batch oracle (one example at a time through
// autograd), in float64, for every layer type and the stride/padding/dilation/groups variants UNets
// use, for a small UNet-shaped network with GroupNorm and self-attention, and for grouped rows
// (noise multiplicity K > 1), where each example's gradient is that of its K-averaged loss.
#include <privdiff/diffusion/spatial_transformer.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/lora.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <functional>

using namespace privdiff::sdk::engine;

namespace {

// A model built from a forward function over registered per-example layers.
struct Net : torch::nn::Module {
  std::function<at::Tensor(const at::Tensor&)> body;
  at::Tensor forward(const at::Tensor& x) { return body(x); }
};

// Per-row loss: a fixed random projection of the output plus its squared norm (non-linear in the
// parameters, different for every row).
RowLoss make_loss(Net& net, const at::Tensor& inputs, std::int64_t group) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor probe_out = net.forward(inputs.narrow(0, 0, 1));
  std::vector<std::int64_t> shape(probe_out.sizes().begin(), probe_out.sizes().end());
  shape[0] = inputs.size(0);
  const at::Tensor target = at::randn(shape, gen, at::TensorOptions().dtype(at::kDouble));
  return [&net, inputs, target, group](const at::Tensor& examples) {
    // rows of the chosen examples: example e owns rows [e*group, (e+1)*group)
    const at::Tensor rows = (examples.unsqueeze(1) * group + at::arange(group, at::kLong)).flatten();
    const at::Tensor out = net.forward(inputs.index_select(0, rows));
    const at::Tensor t = target.index_select(0, rows);
    return (out * t).flatten(1).sum(1) + 0.1 * out.pow(2).flatten(1).sum(1);
  };
}

double max_relative_error(const PerExampleGradients& a, const PerExampleGradients& b) {
  EXPECT_EQ(a.params.size(), b.params.size());
  double worst = 0;
  for (std::size_t j = 0; j < a.grads.size(); ++j) {
    EXPECT_EQ(a.grads[j].sizes(), b.grads[j].sizes());
    const double scale = b.grads[j].abs().max().item<double>() + 1e-30;
    worst = std::max(worst, (a.grads[j] - b.grads[j]).abs().max().item<double>() / scale);
  }
  return worst;
}

void expect_matches_oracle(Net& net, const at::Tensor& inputs, std::int64_t group = 1) {
  net.to(at::kDouble);
  const std::int64_t examples = inputs.size(0) / group;
  const RowLoss loss = make_loss(net, inputs, group);
  const auto fast = per_example_gradients(net, loss, examples, group);
  const auto oracle = micro_batch_per_example_gradients(net, loss, examples, group);
  ASSERT_FALSE(fast.params.empty());
  EXPECT_LT(max_relative_error(fast, oracle), 1e-6);
  // And every gradient is non-trivial (the test would otherwise prove nothing).
  for (std::size_t j = 0; j < fast.grads.size(); ++j) {
    EXPECT_GT(fast.grads[j].abs().max().item<double>(), 1e-8) << "parameter " << j << " of shape "
                                                               << fast.params[j].sizes();
  }
}

at::Tensor randn(std::vector<std::int64_t> shape) {
  return at::randn(shape, at::TensorOptions().dtype(at::kDouble));
}

}  // namespace

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

// A UNet-shaped network: conv in, class + sigma embedding, a residual block with GroupNorm, a
// strided down-sampling conv, self-attention over the 2-D positions, up-sampling and conv out.
struct TinyUnet : Net {
  std::shared_ptr<Conv2d> in, res1, res2, down, up, out;
  std::shared_ptr<GroupNorm> norm1, norm2, attn_norm;
  std::shared_ptr<Linear> emb_proj, qkv, proj;
  std::shared_ptr<Embedding> label_emb;
  TinyUnet() {
    in = register_module("in", std::make_shared<Conv2d>(Conv2dOptions{1, 8, {3, 3}, {1, 1}, {1, 1}}));
    norm1 = register_module("norm1", std::make_shared<GroupNorm>(4, 8));
    res1 = register_module("res1", std::make_shared<Conv2d>(Conv2dOptions{8, 8, {3, 3}, {1, 1}, {1, 1}}));
    label_emb = register_module("label", std::make_shared<Embedding>(10, 8));
    emb_proj = register_module("emb_proj", std::make_shared<Linear>(8, 8));
    norm2 = register_module("norm2", std::make_shared<GroupNorm>(4, 8));
    res2 = register_module("res2", std::make_shared<Conv2d>(Conv2dOptions{8, 8, {3, 3}, {1, 1}, {1, 1}}));
    down = register_module("down", std::make_shared<Conv2d>(Conv2dOptions{8, 16, {3, 3}, {2, 2}, {1, 1}}));
    attn_norm = register_module("attn_norm", std::make_shared<GroupNorm>(4, 16));
    qkv = register_module("qkv", std::make_shared<Linear>(16, 48));
    proj = register_module("proj", std::make_shared<Linear>(16, 16));
    up = register_module("up", std::make_shared<Conv2d>(Conv2dOptions{16, 8, {3, 3}, {1, 1}, {1, 1}}));
    out = register_module("out", std::make_shared<Conv2d>(Conv2dOptions{8, 1, {3, 3}, {1, 1}, {1, 1}}));
    body = [this](const at::Tensor& x) { return run(x); };
  }
  at::Tensor run(const at::Tensor& x) {
    const at::Tensor labels = (x.flatten(1).sum(1).abs() * 3).floor().remainder(10).to(at::kLong);
    at::Tensor h = in->forward(x);
    const at::Tensor emb = emb_proj->forward(at::silu(label_emb->forward(labels)));
    at::Tensor r = res1->forward(at::silu(norm1->forward(h)));
    r = r + emb.unsqueeze(-1).unsqueeze(-1);
    h = h + res2->forward(at::silu(norm2->forward(r)));
    at::Tensor d = down->forward(h);  // [N, 16, 4, 4]
    const auto n = d.size(0), c = d.size(1), hh = d.size(2), ww = d.size(3);
    const at::Tensor tokens = attn_norm->forward(d).flatten(2).transpose(1, 2);  // [N, HW, C]
    const auto qkv_out = qkv->forward(tokens).chunk(3, -1);
    const at::Tensor attn = at::softmax(at::matmul(qkv_out[0], qkv_out[1].transpose(1, 2)) / std::sqrt(double(c)), -1);
    d = d + proj->forward(at::matmul(attn, qkv_out[2])).transpose(1, 2).reshape({n, c, hh, ww});
    at::Tensor u = up->forward(at::upsample_nearest2d(d, {2 * hh, 2 * ww}));
    return out->forward(at::silu(u + h));
  }
};

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

// Fast gradient clipping gives the same clipped sum (and norms) as clipping the materialised
// per-example gradients, flat and per layer, with and without grouping.
void expect_fast_clipping_matches_oracle(const std::function<std::shared_ptr<Net>()>& make,
                                         std::vector<std::int64_t> example_shape) {
  for (std::int64_t group : {1, 3}) {
    for (auto mode : {ClipMode::flat, ClipMode::per_layer}) {
      const std::shared_ptr<Net> made = make();
      Net& net = *made;
      net.to(at::kDouble);
      example_shape[0] = 4 * group;
      const at::Tensor x = randn(example_shape);
      const RowLoss loss = make_loss(net, x, group);
      const auto fast = clipped_gradient_sum(net, loss, 4, group, 0.05, mode);
      const auto reference = clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, group), 0.05, mode);
      EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0));
      EXPECT_LT(reference.factors.max().item<double>(), 1.0);  // every example was clipped
      ASSERT_EQ(fast.sums.size(), reference.sums.size());
      for (std::size_t j = 0; j < fast.sums.size(); ++j) {
        const double scale = reference.sums[j].abs().max().item<double>() + 1e-30;
        EXPECT_LT((fast.sums[j] - reference.sums[j]).abs().max().item<double>() / scale, 1e-6) << j;
      }
    }
  }
}

TEST(FastGradientClipping, EqualsClippingTheOraclesPerExampleGradients) {
  expect_fast_clipping_matches_oracle([] { return std::make_shared<TinyUnet>(); }, {0, 1, 8, 8});
  // DP-LDM's fine-tuned block
  expect_fast_clipping_matches_oracle([] { return std::make_shared<TransformerNet>(); }, {0, 8, 3, 3});
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
    const auto fast = clipped_gradient_sum(net, loss, 6, 1, c, mode);
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

// LoRA adapters (lora.hpp): the closed-form per-example gradients of A and B — alone (the base
// frozen, as DP-LoRA trains) or with the base weights — equal the oracle's, also with K > 1.
namespace {
void randomise_adapters(torch::nn::Module& net) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  for (auto& p : net.named_parameters()) {
    if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0, 0.2, gen);  // B = 0 would zero A's gradient
  }
}
}  // namespace

TEST(PerExampleGradients, LoraAdaptersMatchTheOracle) {
  for (const bool base_trains : {false, true}) {
    for (const std::int64_t group : {1, 3}) {
      TinyUnet net;
      EXPECT_EQ(apply_lora(net, LoraOptions{4, 8.0, 0.0, "^(qkv|proj|emb_proj)$"}), 3);
      randomise_adapters(net);
      if (!base_trains) {
        for (auto& p : net.named_parameters()) p.value().set_requires_grad(p.key().find("lora_") != std::string::npos);
      }
      net.to(at::kDouble);
      EXPECT_EQ(trainable_parameters(net).size(), base_trains ? 31u : 6u);
      expect_matches_oracle(net, randn({3 * group, 1, 8, 8}), group);
    }
  }
}

TEST(FastGradientClipping, CoversLoraAdapters) {
  TinyUnet net;
  apply_lora(net, LoraOptions{2, 0.0, 0.0, "qkv|proj"});
  randomise_adapters(net);
  for (auto& p : net.named_parameters()) p.value().set_requires_grad(p.key().find("lora_") != std::string::npos);
  net.to(at::kDouble);
  const at::Tensor x = randn({4, 1, 8, 8});
  const RowLoss loss = make_loss(net, x, 1);
  const auto fast = clipped_gradient_sum(net, loss, 4, 1, 0.01, ClipMode::flat);
  const auto reference = clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, 1), 0.01, ClipMode::flat);
  EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0));
  for (std::size_t j = 0; j < fast.sums.size(); ++j) EXPECT_TRUE(at::allclose(fast.sums[j], reference.sums[j], 1e-9, 1e-12));
}

TEST(Lora, TheMergedLayerComputesWhatTheAdapterDoes) {
  TinyUnet net;
  apply_lora(net, LoraOptions{4, 2.0, 0.0, "qkv|proj"});
  randomise_adapters(net);
  net.to(at::kDouble);
  const at::Tensor x = randn({3, 1, 8, 8});
  net.train();
  const at::Tensor unmerged = net.forward(x).detach();
  net.eval();  // sampling: one product with W + (alpha / r) B A
  const at::Tensor merged = net.forward(x).detach();
  EXPECT_TRUE(at::allclose(merged, unmerged, 1e-10, 1e-12));
  EXPECT_TRUE(net.qkv->merged_weight().allclose(net.qkv->weight + 0.5 * at::mm(net.qkv->lora_B, net.qkv->lora_A)));
  // Fresh adapters (B = 0) leave the model as it was.
  TinyUnet plain;
  const at::Tensor before = plain.forward(x.to(at::kFloat)).detach();
  apply_lora(plain, LoraOptions{4, 0.0, 0.0, "qkv"});
  EXPECT_TRUE(plain.forward(x.to(at::kFloat)).detach().equal(before));
  try {
    apply_lora(plain, LoraOptions{4, 0.0, 0.0, "nothing_matches"});
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("matches no Linear layer (there are: emb_proj, qkv, proj)"), std::string::npos)
        << e.what();
  }
}
