// MultiTensorAdam/AdamW take LibTorch's own step, bit for bit on the CPU: with and without weight decay,
// a parameter without a gradient for a step (whose step count then lags), and across a checkpoint
// written by one and read by the other. The moving average equals its per-tensor update.
#include <privdiff/engine/multi_tensor_adam.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <vector>

using namespace privdiff::sdk::engine;

namespace {

std::vector<at::Tensor> leaves(std::uint64_t seed) {
  at::manual_seed(static_cast<std::int64_t>(seed));
  std::vector<at::Tensor> out;
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{8, 3, 3, 3}, {8}, {5, 8}, {1}}) {
    out.push_back(at::randn(shape).set_requires_grad(true));
  }
  return out;
}

// Gradients for step `step`, the same for both optimizers; at step 2 the third parameter has none.
void set_grads(const std::vector<at::Tensor>& params, int step) {
  at::manual_seed(100 + step);
  for (std::size_t j = 0; j < params.size(); ++j) {
    if (step == 2 && j == 2) params[j].mutable_grad() = at::Tensor();
    else params[j].mutable_grad() = at::randn(params[j].sizes());
  }
}

void expect_identical(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t j = 0; j < a.size(); ++j) EXPECT_TRUE(at::equal(a[j], b[j])) << "parameter " << j;
}

template <class Ours, class Theirs, class Options>
void expect_same_steps(const Options& options) {
  auto ours_params = leaves(1), their_params = leaves(1);
  Ours ours(ours_params, options);
  Theirs theirs(their_params, options);
  for (int step = 0; step < 5; ++step) {
    set_grads(ours_params, step);
    set_grads(their_params, step);
    ours.step();
    theirs.step();
    expect_identical(ours_params, their_params);
  }
}

}  // namespace

TEST(MultiTensorAdam, TakesLibTorchsStepBitForBit) {
  expect_same_steps<MultiTensorAdam, torch::optim::Adam>(torch::optim::AdamOptions(1e-2));
  expect_same_steps<MultiTensorAdam, torch::optim::Adam>(torch::optim::AdamOptions(3e-3).weight_decay(0.1));
  expect_same_steps<MultiTensorAdamW, torch::optim::AdamW>(torch::optim::AdamWOptions(1e-2));
  expect_same_steps<MultiTensorAdamW, torch::optim::AdamW>(torch::optim::AdamWOptions(3e-3).weight_decay(0.05));
  // amsgrad is LibTorch's own step
  expect_same_steps<MultiTensorAdam, torch::optim::Adam>(torch::optim::AdamOptions(1e-2).amsgrad(true));
}

TEST(MultiTensorAdam, ACheckpointOfOneResumesTheOther) {
  auto ours_params = leaves(2), their_params = leaves(2);
  MultiTensorAdam ours(ours_params, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam theirs(their_params, torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    set_grads(ours_params, step);
    set_grads(their_params, step);
    ours.step();
    theirs.step();
  }
  // Each continues from the other's state: the checkpoint format is LibTorch's.
  torch::serialize::OutputArchive ours_saved, theirs_saved;
  ours.save(ours_saved);
  theirs.save(theirs_saved);
  std::stringstream ours_bytes, theirs_bytes;
  ours_saved.save_to(ours_bytes);
  theirs_saved.save_to(theirs_bytes);
  torch::serialize::InputArchive into_theirs, into_ours;
  into_theirs.load_from(ours_bytes);
  into_ours.load_from(theirs_bytes);
  auto resumed_theirs_params = leaves(3), resumed_ours_params = leaves(3);
  for (std::size_t j = 0; j < ours_params.size(); ++j) {
    at::NoGradGuard no_grad;
    resumed_theirs_params[j].copy_(ours_params[j]);
    resumed_ours_params[j].copy_(their_params[j]);
  }
  torch::optim::Adam resumed_theirs(resumed_theirs_params, torch::optim::AdamOptions(1e-2));
  MultiTensorAdam resumed_ours(resumed_ours_params, torch::optim::AdamOptions(1e-2));
  resumed_theirs.load(into_theirs);
  resumed_ours.load(into_ours);
  for (int step = 3; step < 6; ++step) {
    set_grads(resumed_theirs_params, step);
    set_grads(resumed_ours_params, step);
    set_grads(their_params, step);
    resumed_theirs.step();
    resumed_ours.step();
    theirs.step();
  }
  expect_identical(resumed_theirs_params, their_params);
  expect_identical(resumed_ours_params, their_params);
}

TEST(MultiTensorAdam, TheMovingAverageIsThePerTensorOne) {
  const auto params = leaves(4);
  std::vector<at::Tensor> ours, theirs;
  for (const auto& p : params) {
    ours.push_back(at::randn(p.sizes()));
    theirs.push_back(ours.back().clone());
  }
  update_moving_average(ours, params, 0.99);
  for (std::size_t j = 0; j < params.size(); ++j) theirs[j].mul_(0.99).add_(params[j].detach(), 1 - 0.99);
  expect_identical(ours, theirs);
  EXPECT_FALSE(ours.front().requires_grad());
}
