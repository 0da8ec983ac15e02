// GPU tests (ctest label `gpu`): the private engine on CUDA against the per-example oracle, CPU vs
// CUDA agreement of a private step's clipped sum and noise (made on the GPU), and the device rules. Each test skips
// with its reason where LibTorch sees no GPU (CI, the Debian CPU build); the end-to-end CUDA run
// (train, sample, eval) is tests/e2e/device_test.sh.
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/chacha_blocks.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/device.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>
#include <privdiff/engine/multi_tensor_adam.hpp>
#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/engine/precision.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdio>
#include <utility>
#include <vector>
#ifdef PRIVDIFF_GPU_TESTS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

using namespace privdiff::sdk;
using namespace privdiff::sdk::engine;

namespace {

#define REQUIRE_CUDA()                                                                                       \
  if (!cuda_usable()) {                                                                                      \
    GTEST_SKIP() << (at::hasCUDA() ? "LibTorch has CUDA but sees no GPU" : "CPU-only LibTorch") << ": no CUDA " \
                 << "device here, so this GPU test does not apply";                                          \
  }

const c10::Device cuda(c10::kCUDA, 0);

std::shared_ptr<diffusion::Unet> tiny_unet(at::ScalarType dtype, c10::Device device) {
  at::manual_seed(11);  // the same weights for every call
  diffusion::UnetConfig c;
  c.image_size = 8;
  c.channels = 8;
  c.channel_mult = {1, 2};
  c.num_res_blocks = 1;
  c.attention_resolutions = {4};
  c.num_classes = 3;
  auto net = std::make_shared<diffusion::Unet>(c);
  net->to(dtype);
  net->to(device);
  return net;
}

// Per-row loss of a UNet on fixed inputs: a random projection of its output plus its squared norm.
// Inputs are made on the CPU (the same numbers for every device) and moved.
RowLoss unet_loss(diffusion::Unet& net, std::int64_t rows, at::ScalarType dtype, c10::Device device) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto opts = at::TensorOptions().dtype(dtype);
  const at::Tensor x = at::randn({rows, 1, 8, 8}, gen, opts).to(device);
  const at::Tensor noise = at::rand({rows}, gen, opts).to(device);
  const at::Tensor labels = at::randint(4, {rows}, gen, at::kLong).to(device);
  const at::Tensor target = at::randn({rows, 1, 8, 8}, gen, opts).to(device);
  return [&net, x, noise, labels, target, device](const at::Tensor& examples) {
    const std::int64_t group = x.size(0) / 4;  // 4 examples
    const at::Tensor rows = (examples.to(device).unsqueeze(1) * group + at::arange(group, at::TensorOptions(device).dtype(at::kLong))).flatten();
    const at::Tensor out = net.forward(x.index_select(0, rows), noise.index_select(0, rows), labels.index_select(0, rows));
    return (out * target.index_select(0, rows)).flatten(1).sum(1) + 0.1 * out.pow(2).flatten(1).sum(1);
  };
}

double max_relative_error(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const at::Tensor bj = b[j].to(a[j].device()).to(a[j].scalar_type());
    worst = std::max(worst, ((a[j] - bj).abs().max() / (bj.abs().max() + 1e-30)).item<double>());
  }
  return worst;
}

// A calibrating planner and each strategy forced.
std::vector<NormPlanner> every_gpu_planner() {
  return {NormPlanner(NormPlanner::Mode::calibrate), NormPlanner(NormPlanner::Mode::fixed, NormStrategy::materialised),
          NormPlanner(NormPlanner::Mode::fixed, NormStrategy::ghost),
          NormPlanner(NormPlanner::Mode::fixed, NormStrategy::grouped_convolution)};
}

}  // namespace

TEST(Cuda, PerExampleGradientsMatchTheOracle) {
  REQUIRE_CUDA();
  for (std::int64_t group : {1, 3}) {  // K = 1 and K = 3 rows per example
    auto net = tiny_unet(at::kDouble, cuda);
    const RowLoss loss = unet_loss(*net, 4 * group, at::kDouble, cuda);
    const auto fast = per_example_gradients(*net, loss, 4, group);
    const auto oracle = micro_batch_per_example_gradients(*net, loss, 4, group);
    ASSERT_FALSE(fast.grads.empty());
    EXPECT_TRUE(fast.grads.front().is_cuda());
    EXPECT_LT(max_relative_error(fast.grads, oracle.grads), 1e-6) << "K = " << group;
    // Fast clipping (norms, then the clipped sum) equals clipping the oracle's gradients.
    const auto clipped = clipped_gradient_sum(*net, loss, 4, group, 0.05, ClipMode::flat);
    const auto reference = clip_and_sum(oracle, 0.05, ClipMode::flat);
    EXPECT_TRUE(at::allclose(clipped.norms, reference.norms, 1e-9, 0));
    EXPECT_LT(max_relative_error(clipped.sums, reference.sums), 1e-6);
  }
}

TEST(Cuda, ClippedSumsAgreeWithTheCpu) {
  REQUIRE_CUDA();
  const c10::Device cpu(c10::kCPU);
  // Strict float32 on the GPU: cuDNN may use TF32 for convolutions by default (10-bit mantissa).
  const bool tf32 = at::globalContext().allowTF32CuDNN();
  at::globalContext().setAllowTF32CuDNN(false);
  auto on_cpu = tiny_unet(at::kFloat, cpu);
  auto on_gpu = tiny_unet(at::kFloat, cuda);
  const auto a = clipped_gradient_sum(*on_cpu, unet_loss(*on_cpu, 8, at::kFloat, cpu), 4, 2, 1.0, ClipMode::flat);
  const auto b = clipped_gradient_sum(*on_gpu, unet_loss(*on_gpu, 8, at::kFloat, cuda), 4, 2, 1.0, ClipMode::flat);
  EXPECT_TRUE(at::allclose(a.norms, b.norms.cpu(), 1e-4, 1e-6)) << a.norms << b.norms;
  EXPECT_LT(max_relative_error(a.sums, b.sums), 1e-4);
  at::globalContext().setAllowTF32CuDNN(tf32);
}

TEST(Cuda, MultiTensorAdamTakesLibTorchsStep) {
  REQUIRE_CUDA();
  // On a GPU the _foreach ops are fused kernels (on the CPU, tensor-by-tensor loops checked bit for bit
  // by MultiTensorAdam.*): the same update as LibTorch's per-tensor Adam to float32 rounding.
  auto ours_net = tiny_unet(at::kFloat, cuda), their_net = tiny_unet(at::kFloat, cuda);
  auto ours_params = ours_net->parameters(), their_params = their_net->parameters();
  MultiTensorAdam ours(ours_params, torch::optim::AdamOptions(1e-2).weight_decay(0.01));
  torch::optim::Adam theirs(their_params, torch::optim::AdamOptions(1e-2).weight_decay(0.01));
  std::vector<at::Tensor> average;
  for (const auto& p : ours_params) average.push_back(p.detach().clone());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  for (int step = 0; step < 5; ++step) {
    for (std::size_t j = 0; j < ours_params.size(); ++j) {
      const at::Tensor g = at::randn(ours_params[j].sizes(), gen).to(cuda);
      ours_params[j].mutable_grad() = g;
      their_params[j].mutable_grad() = g.clone();
    }
    ours.step();
    theirs.step();
    update_moving_average(average, ours_params, 0.9);
  }
  EXPECT_LT(max_relative_error(ours_params, their_params), 1e-5);
  EXPECT_TRUE(average.front().is_cuda());
}

TEST(Cuda, NoiseIsTheSameOnEveryDevice) {
  REQUIRE_CUDA();
  // Reproducible streams: the same seed gives the same noise on the CPU and on the GPU, so the
  // noise is drawn from the audited ChaCha20 stream whatever the device (the GPU computes it
  // itself, with a transform built to give the CPU's bits).
  const at::Tensor like_cpu = at::zeros({3, 1000});
  auto a = GaussianNoise::seeded(3).sample(like_cpu, 2.0);
  auto b = GaussianNoise::seeded(3).sample(like_cpu.to(cuda), 2.0);
  EXPECT_TRUE(b.is_cuda());
  EXPECT_TRUE(at::equal(a, b.cpu()));
  EXPECT_NEAR(b.std().item<double>(), 2.0, 0.1);
}

TEST(Cuda, KeystreamOnTheGpuIsTheCpusWordForWord) {
  REQUIRE_CUDA();
  // The GPU's keystream (one CUDA kernel in a CUDA build) against the CPU's lanes, for runs that start
  // anywhere, one that crosses the counter's 2^32 boundary (the carry into word 13) among them.
  const RandomStream::Key key{0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c, 0x13121110, 0x17161514, 0x1b1a1918, 0x1f1e1d1c};
  for (const auto& [first, count] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {0, 1}, {1, 1000}, {0xFFFFFFFFull - 300, 1000}, {0x123456789ull, 70001}}) {
    const KeystreamBlocks run{key, 0x4a000000, first, count};
    std::vector<std::uint32_t> words(16 * count);
    keystream_words(run, words.data());
    const at::Tensor expected = at::tensor(std::vector<std::int64_t>(words.begin(), words.end()), at::kLong).view({-1, 16});
    const at::Tensor got = keystream_words(run, cuda);
    ASSERT_TRUE(got.is_cuda());
    EXPECT_TRUE(at::equal(got.cpu(), expected)) << "first block " << first << ", " << count << " blocks";
  }
}

TEST(Cuda, NoiseForCudaTensorsIsMadeOnTheGpu) {
  REQUIRE_CUDA();
  // A step's noise for parameters on the GPU: keystream and transform as tensor operations on the
  // GPU (one run for all tensors), equal to the CPU generator's noise and leaving the same counter.
  EXPECT_EQ(GaussianNoise::generator_for(cuda), NoiseGenerator::tensor_ops);
  const std::vector<at::Tensor> on_cpu{at::zeros({3, 1000}), at::zeros({7}, at::kDouble), at::zeros({0}),
                                       at::zeros({64, 32, 3, 3})};
  std::vector<at::Tensor> on_gpu;
  for (const auto& t : on_cpu) on_gpu.push_back(t.to(cuda));
  auto a = GaussianNoise::seeded(4), b = GaussianNoise::seeded(4);
  const auto expected = a.sample_all(on_cpu, 0.5);
#ifdef PRIVDIFF_GPU_TESTS_CUDA
  torch::cuda::synchronize(cuda.index());
  c10::cuda::CUDACachingAllocator::resetPeakStats(cuda.index());
  const auto before = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda.index()).allocated_bytes[0].current;
#endif
  const auto got = b.sample_all(on_gpu, 0.5);
  ASSERT_EQ(got.size(), on_cpu.size());
  for (std::size_t j = 0; j < got.size(); ++j) {
    EXPECT_TRUE(got[j].is_cuda());
    EXPECT_TRUE(at::equal(got[j].cpu(), expected[j])) << "tensor " << j;
  }
  EXPECT_TRUE(at::equal(a.state(), b.state()));
#ifdef PRIVDIFF_GPU_TESTS_CUDA
  // The keystream of every block (16 int64 words each) was on the GPU; had the noise been made on
  // the CPU, only the results (about 100 KB here) would have been.
  const std::int64_t blocks = (3000 / 2) + 4 + 0 + (64 * 32 * 9 / 2);
  const auto peak = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda.index()).allocated_bytes[0].peak;
  EXPECT_GE(peak - before, blocks * 16 * 8);
#endif
}

TEST(Cuda, AutoPicksTheGpuAndCudaIndicesAreChecked) {
  REQUIRE_CUDA();
  EXPECT_TRUE(resolve_device("auto").is_cuda());
  EXPECT_EQ(resolve_device("cuda"), cuda);
  EXPECT_THROW(resolve_device("cuda:" + std::to_string(torch::cuda::device_count())), DeviceUnavailable);
}

TEST(Device, CudaWithoutAGpuIsAnErrorNeverACpuRun) {
  EXPECT_EQ(resolve_device("cpu"), c10::Device(c10::kCPU));
  EXPECT_THROW(resolve_device("gpu"), std::invalid_argument);
  if (cuda_usable()) GTEST_SKIP() << "this machine has a GPU: the refusal does not apply";
  EXPECT_EQ(resolve_device("auto"), c10::Device(c10::kCPU));
  try {
    resolve_device("cuda");
    FAIL() << "cuda resolved on a machine without one";
  } catch (const DeviceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("device \"cuda\""), std::string::npos) << e.what();
  }
}

// Issue #28's engine on the GPU: every norm strategy (ghost, grouped convolution, materialised),
// the calibrated plan, one and two backward passes, and the micro-batch path give the oracle's clipped
// sum in float64.
TEST(Cuda, EveryNormStrategyAndPathMatchesTheOracle) {
  REQUIRE_CUDA();
  for (std::int64_t group : {1, 3}) {
    auto net = tiny_unet(at::kDouble, cuda);
    const RowLoss loss = unet_loss(*net, 4 * group, at::kDouble, cuda);
    const auto reference = clip_and_sum(micro_batch_per_example_gradients(*net, loss, 4, group), 0.05, ClipMode::flat);
    for (const bool two_passes : {false, true}) {  // issue #71's two backward passes too
      std::vector<NormPlanner> planners = every_gpu_planner();
      for (auto& planner : planners) {
        const auto fast = two_passes ? clipped_gradient_sum_two_passes(*net, loss, 4, group, 0.05, ClipMode::flat, planner)
                                     : clipped_gradient_sum(*net, loss, 4, group, 0.05, ClipMode::flat, planner);
        EXPECT_TRUE(fast.sums.front().is_cuda());
        EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0)) << "K = " << group << ", two " << two_passes;
        EXPECT_LT(max_relative_error(fast.sums, reference.sums), 1e-6) << "K = " << group << ", two " << two_passes;
      }
    }
    const auto micro = micro_batch_clipped_sum(*net, loss, 4, group, 0.05, ClipMode::flat);
    EXPECT_TRUE(at::allclose(micro.norms, reference.norms, 1e-9, 0));
    EXPECT_LT(max_relative_error(micro.sums, reference.sums), 1e-6);
  }
}

// The engine plan is measured on the GPU (kernels waited for): both paths timed, every layer planned.
TEST(Cuda, TheEnginePlanIsMeasuredOnTheGpu) {
  REQUIRE_CUDA();
  auto net = tiny_unet(at::kFloat, cuda);
  EngineCalibration settings;
  settings.synthetic_loss = [&net](std::int64_t) { return unet_loss(*net, 4, at::kFloat, cuda); };
  settings.chunk = 4;
  NormPlanner planner(NormPlanner::Mode::calibrate);
  const EnginePlan plan = calibrate_engine(*net, settings, planner);
  EXPECT_TRUE(plan.seconds_per_example.count("micro_batch"));
  EXPECT_TRUE(plan.seconds_per_example.count("vectorised/4"));
  EXPECT_FALSE(planner.counts().empty());
}

// bf16 autocast and TF32 forwards on the GPU: the norms and clipped sums come out in float32/float64,
// close to a strict float32 step (the privacy-critical part never runs in lower precision).
TEST(Cuda, LowerPrecisionForwardsAreClippedInFloat32) {
  REQUIRE_CUDA();
  const bool tf32 = at::globalContext().allowTF32CuDNN(), tf32_cublas = at::globalContext().allowTF32CuBLAS();
  at::globalContext().setAllowTF32CuDNN(false);
  auto net = tiny_unet(at::kFloat, cuda);
  const RowLoss plain = unet_loss(*net, 8, at::kFloat, cuda);
  const auto strict = clipped_gradient_sum(*net, plain, 4, 2, 1.0, ClipMode::flat);
  for (auto precision : {Precision::tf32, Precision::bf16}) {
    const RowLoss loss = [&](const at::Tensor& examples) {
      const PrecisionScope scope(precision, cuda);
      return plain(examples).to(at::kFloat);
    };
    const auto low = clipped_gradient_sum(*net, loss, 4, 2, 1.0, ClipMode::flat);
    EXPECT_EQ(low.norms.scalar_type(), at::kDouble);
    for (const auto& s : low.sums) EXPECT_EQ(s.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(low.norms, strict.norms, 5e-2, 1e-6)) << to_string(precision);
    EXPECT_LT(max_relative_error(low.sums, strict.sums), 0.1) << to_string(precision);
  }
  EXPECT_EQ(at::globalContext().allowTF32CuBLAS(), tf32_cublas);  // the scopes restored the settings
  EXPECT_FALSE(at::globalContext().allowTF32CuDNN());
  at::globalContext().setAllowTF32CuDNN(tf32);
}

// In float32 with the run's own settings (cuDNN's TF32 allowed, as a stage's default precision) and
// in bf16 and tf32 forwards, the replay gives the first pass's output gradients bit for bit (else
// it throws) and the result is the one-pass engine's; the two passes' peak memory is below one pass's.
TEST(Cuda, TwoBackwardPassesReplayExactlyAndHoldLess) {
  REQUIRE_CUDA();
  auto net = tiny_unet(at::kFloat, cuda);
  const RowLoss plain = unet_loss(*net, 512, at::kFloat, cuda);
  for (auto precision : {Precision::float32, Precision::tf32, Precision::bf16}) {
    const RowLoss loss = [&](const at::Tensor& examples) {
      const PrecisionScope scope(precision, cuda);
      return plain(examples).to(at::kFloat);
    };
    NormPlanner planner(NormPlanner::Mode::cost_model);
#ifdef PRIVDIFF_GPU_TESTS_CUDA
    torch::cuda::synchronize();
    c10::cuda::CUDACachingAllocator::resetPeakStats(cuda.index());
    const auto base = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda.index()).allocated_bytes[0].current;
#endif
    const auto one = clipped_gradient_sum(*net, loss, 4, 128, 1.0, ClipMode::flat, planner);
#ifdef PRIVDIFF_GPU_TESTS_CUDA
    torch::cuda::synchronize();
    const auto one_peak = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda.index()).allocated_bytes[0].peak - base;
    c10::cuda::CUDACachingAllocator::resetPeakStats(cuda.index());
#endif
    ClippedSum two;
    ASSERT_NO_THROW(two = clipped_gradient_sum_two_passes(*net, loss, 4, 128, 1.0, ClipMode::flat, planner))
        << to_string(precision);
#ifdef PRIVDIFF_GPU_TESTS_CUDA
    torch::cuda::synchronize();
    const auto two_peak = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda.index()).allocated_bytes[0].peak - base;
    std::printf("%s: peak above the model, one pass %.1f MiB, two passes %.1f MiB\n", to_string(precision).c_str(),
                one_peak / 1048576.0, two_peak / 1048576.0);
    EXPECT_LT(two_peak, one_peak) << to_string(precision);
#endif
    // The forward draws nothing: both see the same loss, so the norms agree to float rounding.
    EXPECT_TRUE(at::allclose(two.norms, one.norms, 1e-4, 1e-6)) << to_string(precision);
    EXPECT_LT(max_relative_error(two.sums, one.sums), 1e-3) << to_string(precision);
  }
}
