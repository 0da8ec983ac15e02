// The micro-batch path and the engine's choice of path: the streaming micro-batch clipped sum
// equals clipping the oracle's per-example gradients (float64, flat and per layer, K = 1 and 3,
// with and without closed-form layers), and calibrate_engine plans norm strategies, keeps a
// requested path, never grows the chunk and refuses to shrink a chunk it may not.
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>
#include <privdiff/engine/norm_strategy.hpp>

#include "oracle_networks.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace privdiff::sdk::engine;
using namespace privdiff::testing::oracle;

namespace {

// TinyUnet in float64 with a loss over `examples` random examples of K rows each.
struct Fixture {
  std::int64_t group;
  std::shared_ptr<TinyUnet> net = std::make_shared<TinyUnet>();
  at::Tensor x;
  RowLoss loss;
  explicit Fixture(std::int64_t k, std::int64_t examples = 4) : group(k) {
    net->to(at::kDouble);
    x = randn({examples * k, 1, 8, 8});
    loss = make_loss(*net, x, k);
  }
};

}  // namespace

TEST(MicroBatchClipping, EqualsClippingTheOraclesPerExampleGradients) {
  for (std::int64_t k : {1, 3}) {
    for (auto mode : {ClipMode::flat, ClipMode::per_layer}) {
      Fixture f(k);
      const auto reference = clip_and_sum(micro_batch_per_example_gradients(*f.net, f.loss, 4, k), 0.05, mode);
      const auto streamed = micro_batch_clipped_sum(*f.net, f.loss, 4, k, 0.05, mode);
      expect_clipped_sums_equal(streamed, reference, "K " + std::to_string(k));
      EXPECT_TRUE(at::allclose(streamed.factors, reference.factors, 1e-9, 0));
    }
  }
}

TEST(MicroBatchClipping, WorksForModulesWithoutClosedFormAndRefusesWrongLossSizes) {
  Net net;
  auto lin = net.register_module("lin", torch::nn::Linear(5, 3));  // LibTorch's own layer
  net.body = [lin](const at::Tensor& x) { return lin->forward(at::tanh(x)); };
  net.to(at::kDouble);
  const at::Tensor x = randn({6, 5});
  const RowLoss loss = make_loss(net, x, 1);
  expect_clipped_sums_equal(micro_batch_clipped_sum(net, loss, 6, 1, 0.01, ClipMode::flat),
                            clip_and_sum(micro_batch_per_example_gradients(net, loss, 6, 1), 0.01, ClipMode::flat),
                            "torch::nn::Linear");
  EXPECT_THROW(micro_batch_clipped_sum(net, loss, 3, 2, 0.01, ClipMode::flat), std::invalid_argument);
  EXPECT_THROW(micro_batch_clipped_sum(net, loss, 3, 1, 0.0, ClipMode::flat), std::invalid_argument);
}

TEST(EnginePath, EitherPathGivesTheOraclesClippedSum) {
  Fixture f(3);
  const auto reference = clip_and_sum(micro_batch_per_example_gradients(*f.net, f.loss, 4, 3), 0.05, ClipMode::flat);
  for (auto path : {EnginePath::vectorised, EnginePath::micro_batch}) {
    NormPlanner planner;
    const EnginePlan plan{path, 4, {}};
    expect_clipped_sums_equal(clipped_sum_along(plan, *f.net, f.loss, 4, 3, 0.05, ClipMode::flat, planner), reference,
                              to_string(path));
  }
}

TEST(EnginePath, CalibrationPlansTheNormsAndChoosesAPathAndAChunk) {
  Fixture f(1, 16);
  EngineCalibration settings;
  settings.synthetic_loss = [&f](std::int64_t) { return f.loss; };
  settings.chunk = 16;
  settings.may_shrink_chunk = true;
  NormPlanner planner(NormPlanner::Mode::calibrate);
  const EnginePlan plan = calibrate_engine(*f.net, settings, planner);
  EXPECT_GE(plan.chunk, 1);
  EXPECT_LE(plan.chunk, 16);
  EXPECT_TRUE(plan.path == EnginePath::vectorised || plan.path == EnginePath::micro_batch);
  // Both paths were measured, the chunks from the smallest (16 / 8) up.
  EXPECT_TRUE(plan.seconds_per_example.count("micro_batch"));
  EXPECT_TRUE(plan.seconds_per_example.count("vectorised/2"));
  EXPECT_TRUE(plan.seconds_per_example.count("vectorised/" + std::to_string(plan.chunk)) ||
              plan.path == EnginePath::micro_batch);
  EXPECT_FALSE(planner.counts().empty());  // every per-example layer call has a strategy
  const auto described = plan.describe(planner);
  EXPECT_EQ(described.at("path"), to_string(plan.path));
  EXPECT_EQ(described.at("chunk"), std::to_string(plan.chunk));
  EXPECT_NE(described.at("seconds_per_example").find("micro_batch"), std::string::npos);

  // A chunk the user set is never changed; a requested path is kept (and not measured).
  settings.may_shrink_chunk = false;
  NormPlanner second(NormPlanner::Mode::calibrate);
  const EnginePlan fixed_chunk = calibrate_engine(*f.net, settings, second);
  EXPECT_EQ(fixed_chunk.chunk, 16);
  EXPECT_FALSE(fixed_chunk.seconds_per_example.count("vectorised/8"));
  for (auto path : {EnginePath::vectorised, EnginePath::micro_batch}) {
    settings.requested = path;
    NormPlanner third(NormPlanner::Mode::calibrate);
    const EnginePlan kept = calibrate_engine(*f.net, settings, third);
    EXPECT_EQ(kept.path, path);
    EXPECT_EQ(kept.chunk, 16);
    EXPECT_TRUE(kept.seconds_per_example.empty());
  }
}

TEST(EnginePath, TheChunkSearchStopsAtTheFirstClearlySlowerChunk) {
  EXPECT_EQ(chunks_to_try(64, true), (std::vector<std::int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(chunks_to_try(100, true), (std::vector<std::int64_t>{12, 25, 50, 100}));
  EXPECT_EQ(chunks_to_try(3, true), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(chunks_to_try(64, false), (std::vector<std::int64_t>{64}));
  // At most 64 rows after the first (a CPU): B 32 x K 8 tries 4 and 8 examples, B 128 x K 1 up to 64.
  EXPECT_EQ(chunks_to_try(32, true, 8, 64), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(chunks_to_try(128, true, 1, 64), (std::vector<std::int64_t>{16, 32, 64}));
  EXPECT_EQ(chunks_to_try(64, true, 32, 64), (std::vector<std::int64_t>{8}));
  EXPECT_EQ(chunks_to_try(64, false, 32, 64), (std::vector<std::int64_t>{64}));  // a chunk the user set
  // Seconds per example by chunk; which chunks a search timed.
  auto search = [](std::map<std::int64_t, double> seconds) {
    std::vector<std::int64_t> tried;
    const std::int64_t chosen = fastest_chunk({8, 16, 32, 64}, [&](std::int64_t c) {
      tried.push_back(c);
      return seconds.at(c);
    });
    return std::make_pair(chosen, tried);
  };
  // B 32 x K 8 as measured: half the chunk 2 times slower per example than a quarter; the
  // whole chunk (the stage's peak memory before) is never tried.
  EXPECT_EQ(search({{8, 0.0567}, {16, 0.0545}, {32, 0.107}, {64, 0.127}}),
            std::make_pair(std::int64_t{16}, std::vector<std::int64_t>{8, 16, 32}));
  // B 64 x K 1 as measured with LibTorch 2.15: level, then faster; differences below 1.5 times go on.
  EXPECT_EQ(search({{8, 0.0090}, {16, 0.0096}, {32, 0.0088}, {64, 0.0078}}),
            std::make_pair(std::int64_t{64}, std::vector<std::int64_t>{8, 16, 32, 64}));
  // A clearly slower chunk ends the search, even where a larger one would have been faster.
  EXPECT_EQ(search({{8, 1.0}, {16, 1.6}, {32, 0.5}, {64, 0.4}}),
            std::make_pair(std::int64_t{8}, std::vector<std::int64_t>{8, 16}));
  // Level timings (within 5 %): the largest chunk, whose steps run fewer, larger passes.
  EXPECT_EQ(search({{8, 0.0089}, {16, 0.0092}, {32, 0.0091}, {64, 0.0092}}),
            std::make_pair(std::int64_t{64}, std::vector<std::int64_t>{8, 16, 32, 64}));
  // Every doubling pays: the whole chunk.
  EXPECT_EQ(search({{8, 4.0}, {16, 3.0}, {32, 2.0}, {64, 1.0}}),
            std::make_pair(std::int64_t{64}, std::vector<std::int64_t>{8, 16, 32, 64}));
}

TEST(EnginePath, ModelsWithoutClosedFormTakeTheMicroBatchPath) {
  Net net;
  auto lin = net.register_module("lin", torch::nn::Linear(5, 3));
  net.body = [lin](const at::Tensor& x) { return lin->forward(x); };
  const at::Tensor x = randn({4, 5});
  net.to(at::kDouble);
  EngineCalibration settings;
  settings.synthetic_loss = [&](std::int64_t) { return make_loss(net, x, 1); };
  settings.chunk = 4;
  NormPlanner planner;
  EXPECT_EQ(calibrate_engine(net, settings, planner).path, EnginePath::micro_batch);
  EXPECT_EQ(engine_path_from_string("auto"), EnginePath::automatic);
  EXPECT_THROW(engine_path_from_string("fast"), std::invalid_argument);
  EXPECT_EQ(norm_strategy_from_string("ghost"), NormStrategy::ghost);
  EXPECT_THROW(norm_strategy_from_string("fastest"), std::invalid_argument);
}
