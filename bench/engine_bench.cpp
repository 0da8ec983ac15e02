// Time per DP-SGD step on DPDM's Fashion-MNIST UNet (28x28, 32 channels, multipliers 1,2,2, two
// blocks, attention at 7: ~1.75M parameters), per physical batch and noise multiplicity K:
//   nonprivate  forward + ordinary backward of the mean loss
//   vectorised  forward + clipped per-example gradient sum (fast gradient clipping, the DP step)
//   materialised forward + all per-example gradients held at once + clipping and summation
//   oracle      one example at a time through autograd (the micro-batch reference)
// Usage: engine_bench MODE BATCH K [REPEATS]  -> one JSON line with the median seconds per step and
// the process's peak resident memory (run one configuration per process; bench/run_engine_bench.sh
// runs them all and prints the table).
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/per_example_gradients.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

using namespace privdiff::sdk;

namespace {

long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: engine_bench nonprivate|vectorised|materialised|oracle BATCH K [REPEATS]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::int64_t batch = std::stoll(argv[2]), k = std::stoll(argv[3]);
  const int repeats = argc > 4 ? std::stoi(argv[4]) : 3;
  at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  torch::manual_seed(0);
  diffusion::Unet unet(diffusion::UnetConfig{});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor images = at::rand({batch, 1, 28, 28}, gen) * 2 - 1;
  const at::Tensor labels = at::randint(0, 10, {batch}, gen, at::kLong);

  // A denoising loss with K noise draws per example (the shape of DPDM's loss; the exact EDM
  // weighting does not change the cost).
  const engine::RowLoss loss = [&](const at::Tensor& examples) {
    const at::Tensor x = images.index_select(0, examples).repeat_interleave(k, 0);
    const at::Tensor y = labels.index_select(0, examples).repeat_interleave(k, 0);
    const at::Tensor sigma = at::exp(at::randn({x.size(0)}, gen) * 1.2 - 1.2);
    const at::Tensor noisy = x + sigma.view({-1, 1, 1, 1}) * at::randn(x.sizes(), gen);
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
    } else if (mode == "oracle") {
      const auto grads = engine::micro_batch_per_example_gradients(unet, loss, batch, k);
      engine::clip_and_sum(grads, 1.0, engine::ClipMode::flat);
    } else {
      throw std::invalid_argument("mode: nonprivate, vectorised or oracle");
    }
  };
  step();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  std::printf("{\"mode\": \"%s\", \"batch\": %lld, \"k\": %lld, \"parameters\": %lld, \"threads\": %d, "
              "\"seconds_per_step\": %.4f, \"peak_rss_mib\": %.0f}\n",
              mode.c_str(), static_cast<long long>(batch), static_cast<long long>(k),
              static_cast<long long>(unet.parameter_count()), at::get_num_threads(), times[times.size() / 2],
              peak_rss_kib() / 1024.0);
  return 0;
}
