#pragma once
// The micro-batch oracle and the small networks the per-example gradient tests check against it:
// shared by the SDK's engine tests and the adapter plugins' tests (an adapter is checked the same way).
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::testing::oracle {

using namespace privdiff::sdk::engine;

// A model built from a forward function over registered per-example layers.
struct Net : torch::nn::Module {
  std::function<at::Tensor(const at::Tensor&)> body;
  at::Tensor forward(const at::Tensor& x) { return body(x); }
};

// Per-row loss: a fixed random projection of the output plus its squared norm (non-linear in the
// parameters, different for every row).
inline RowLoss make_loss(Net& net, const at::Tensor& inputs, std::int64_t group) {
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

inline double max_relative_error(const PerExampleGradients& a, const PerExampleGradients& b) {
  EXPECT_EQ(a.params.size(), b.params.size());
  double worst = 0;
  for (std::size_t j = 0; j < a.grads.size(); ++j) {
    EXPECT_EQ(a.grads[j].sizes(), b.grads[j].sizes());
    const double scale = b.grads[j].abs().max().item<double>() + 1e-30;
    worst = std::max(worst, (a.grads[j] - b.grads[j]).abs().max().item<double>() / scale);
  }
  return worst;
}

inline void expect_matches_oracle(Net& net, const at::Tensor& inputs, std::int64_t group = 1) {
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

inline at::Tensor randn(std::vector<std::int64_t> shape) {
  return at::randn(shape, at::TensorOptions().dtype(at::kDouble));
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

// Every way of choosing the norm strategies: the cost model, a calibration, and each strategy
// forced wherever a layer offers it (a layer that does not falls back to materialised norms).
inline std::vector<NormPlanner> every_norm_planner() {
  return {NormPlanner(NormPlanner::Mode::cost_model), NormPlanner(NormPlanner::Mode::calibrate),
          NormPlanner(NormPlanner::Mode::fixed, NormStrategy::materialised),
          NormPlanner(NormPlanner::Mode::fixed, NormStrategy::ghost),
          NormPlanner(NormPlanner::Mode::fixed, NormStrategy::grouped_convolution),
          NormPlanner(NormPlanner::Mode::fixed, NormStrategy::gradient_filter)};
}

// `fast` (clipped_gradient_sum) equals clipping the oracle's per-example gradients: norms to 1e-9,
// sums to 1e-6 relative, with every example clipped.
inline void expect_clipped_sums_equal(const ClippedSum& fast, const ClippedSum& reference, const std::string& what) {
  EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0)) << what;
  EXPECT_LT(reference.factors.max().item<double>(), 1.0) << what;  // every example was clipped
  ASSERT_EQ(fast.sums.size(), reference.sums.size()) << what;
  for (std::size_t j = 0; j < fast.sums.size(); ++j) {
    const double scale = reference.sums[j].abs().max().item<double>() + 1e-30;
    EXPECT_LT((fast.sums[j] - reference.sums[j]).abs().max().item<double>() / scale, 1e-6) << what << " parameter " << j;
  }
}

// Fast gradient clipping (`passes` backward passes) gives the same clipped sum (and norms) as
// clipping the materialised per-example gradients, flat and per layer, with and without grouping,
// with every norm strategy.
inline void expect_fast_clipping_matches_oracle(const std::function<std::shared_ptr<Net>()>& make,
                                                std::vector<std::int64_t> example_shape,
                                                ClipPasses passes = ClipPasses::one) {
  for (std::int64_t group : {1, 3}) {
    for (auto mode : {ClipMode::flat, ClipMode::per_layer}) {
      // Seeded here: a calibrating planner may draw a timing-dependent amount of randomness, which
      // would otherwise change the next network and data (and whether every example is clipped).
      at::manual_seed(static_cast<std::uint64_t>(10 * group + (mode == ClipMode::flat ? 0 : 1)));
      const std::shared_ptr<Net> made = make();
      Net& net = *made;
      net.to(at::kDouble);
      example_shape[0] = 4 * group;
      const at::Tensor x = randn(example_shape);
      const RowLoss loss = make_loss(net, x, group);
      const auto reference = clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, group), 0.05, mode);
      for (NormPlanner& planner : every_norm_planner()) {
        const auto fast = passes == ClipPasses::two
                              ? clipped_gradient_sum_two_passes(net, loss, 4, group, 0.05, mode, planner)
                              : clipped_gradient_sum(net, loss, 4, group, 0.05, mode, planner);
        std::string what = to_string(passes) + " pass(es), K " + std::to_string(group) + (mode == ClipMode::flat ? " flat" : " per layer") + ", plan";
        for (const auto& [strategy, count] : planner.counts()) what += " " + strategy + " x" + std::to_string(count);
        expect_clipped_sums_equal(fast, reference, what);
      }
    }
  }
}

}  // namespace privdiff::testing::oracle
