// Time per DP-SGD step on DPDM's Fashion-MNIST UNet (28x28, 32 channels, multipliers 1,2,2, two
// blocks, attention at 7: ~1.75M parameters), per physical batch and noise multiplicity K:
//   nonprivate  forward + ordinary backward of the mean loss
//   vectorised  forward + clipped per-example gradient sum (fast gradient clipping, the DP step)
//   materialised forward + all per-example gradients held at once + clipping and summation
//   oracle      one example at a time through autograd (the micro-batch reference)
//   noise        the Gaussian noise of one logical step for every parameter (secure ChaCha20 stream,
//                GaussianNoise::sample_all: vectorised loops on the CPU, tensor operations on a GPU)
//   device_noise the same noise from the tensor-operation generator, also on the CPU (for comparison)
// Usage: engine_bench MODE BATCH K [REPEATS] [cpu|cuda]  -> one JSON line with the median seconds per
// step, rows per second and the peak memory (resident on the CPU; the caching allocator's peak on
// a GPU). Run one configuration per process; bench/run_engine_bench.sh runs them all (CPU table) and
// bench/run_gpu_bench.sh the GPU table.
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/device.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/per_example_gradients.hpp>

#include "bench_arguments.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/types.h>
#ifdef PRIVDIFF_BENCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace privdiff::sdk;

namespace {

using privdiff::bench::positive;

long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

double peak_device_mib(const c10::Device& device) {
#ifdef PRIVDIFF_BENCH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);  // [0]: all pools
  }
#endif
  return device.is_cuda() ? -1 : peak_rss_kib() / 1024.0;
}

}  // namespace

constexpr const char* usage =
    "usage: engine_bench nonprivate|vectorised|materialised|oracle|noise|device_noise BATCH K [REPEATS] [cpu|cuda]\n";

int bench(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return bench(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "engine_bench: %s\n%s", e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_bench: %s\n", e.what());
    return 1;
  }
}

int bench(int argc, char** argv) {
  if (argc < 4) throw std::invalid_argument("expected a mode, BATCH and K");
  const std::string mode = argv[1];
  const std::vector<std::string> modes{"nonprivate", "vectorised", "materialised", "oracle", "noise", "device_noise"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    throw std::invalid_argument("unknown mode '" + mode + "'");
  }
  const std::int64_t batch = positive(argv[2], "BATCH"), k = positive(argv[3], "K");
  const int repeats = argc > 4 ? static_cast<int>(positive(argv[4], "REPEATS")) : 3;
  const c10::Device device = engine::resolve_device(argc > 5 ? argv[5] : "cpu");
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  // Every core, or $OMP_NUM_THREADS when set (as privdiff's threads = 0)
  const char* omp = std::getenv("OMP_NUM_THREADS");
  at::set_num_threads(omp && std::atoi(omp) > 0 ? std::atoi(omp)
                                                : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  torch::manual_seed(0);
  diffusion::Unet unet(diffusion::UnetConfig{});
  unet.to(device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor images = (at::rand({batch, 1, 28, 28}, gen) * 2 - 1).to(device);
  const at::Tensor labels = at::randint(0, 10, {batch}, gen, at::kLong).to(device);
  const auto on_device = at::TensorOptions(device);

  // A denoising loss with K noise draws per example (the shape of DPDM's loss; the exact EDM
  // weighting does not change the cost).
  const engine::RowLoss loss = [&](const at::Tensor& examples) {
    const at::Tensor e = examples.to(device);
    const at::Tensor x = images.index_select(0, e).repeat_interleave(k, 0);
    const at::Tensor y = labels.index_select(0, e).repeat_interleave(k, 0);
    const at::Tensor sigma = at::exp(at::randn({x.size(0)}, on_device) * 1.2 - 1.2);
    const at::Tensor noisy = x + sigma.view({-1, 1, 1, 1}) * at::randn(x.sizes(), on_device);
    const at::Tensor out = unet.forward(noisy / at::sqrt(sigma.pow(2) + 1.0 / 3).view({-1, 1, 1, 1}), sigma.log() / 4, y);
    return (out - x).pow(2).flatten(1).mean(1);
  };

  auto step = [&] {
    if (mode == "nonprivate") {
      unet.zero_grad();
      loss(at::arange(batch, at::kLong)).reshape({batch, k}).mean(1).mean().backward();
    } else if (mode == "vectorised") {
      engine::clipped_gradient_sum(unet, loss, batch, k, 1.0, engine::ClipMode::flat);
    } else if (mode == "materialised") {
      const auto grads = engine::per_example_gradients(unet, loss, batch, k);
      engine::clip_and_sum(grads, 1.0, engine::ClipMode::flat);
    } else if (mode == "noise") {
      auto noise = engine::GaussianNoise::secure();
      noise.sample_all(unet.parameters(), 1.0);
    } else if (mode == "device_noise") {
      auto noise = engine::GaussianNoise::secure();
      noise.sample_all(unet.parameters(), 1.0, engine::NoiseGenerator::tensor_ops);
    } else if (mode == "oracle") {
      const auto grads = engine::micro_batch_per_example_gradients(unet, loss, batch, k);
      engine::clip_and_sum(grads, 1.0, engine::ClipMode::flat);
    } else {
      throw std::logic_error("mode " + mode + " has no step");
    }
  };
  step();  // warm-up
  sync();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    step();
    sync();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf("{\"mode\": \"%s\", \"device\": \"%s\", \"batch\": %lld, \"k\": %lld, \"parameters\": %lld, "
              "\"threads\": %d, \"seconds_per_step\": %.5f, \"rows_per_second\": %.0f, \"peak_rss_mib\": %.0f}\n",
              mode.c_str(), device.str().c_str(), static_cast<long long>(batch), static_cast<long long>(k),
              static_cast<long long>(unet.parameter_count()), at::get_num_threads(), median,
              static_cast<double>(batch * k) / median, peak_device_mib(device));
  return 0;
}
