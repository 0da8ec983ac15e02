// Time of one training step (forward + backward + optimizer step) of DPImageBench's downstream
// classifiers (sdk/include/privdiff/evaluation/benchmark_classifiers.hpp) at a batch size: what a
// CPU-scaled evaluation schedule is planned from.
// Usage: classifier_bench resnet|wrn|resnext cifar|non_cifar CHANNELS SIZE BATCH [REPEATS] [THREADS] [cpu|cuda]
//   -> one JSON line: the median and the minimum seconds per step (after one warm-up step), the
//   parameter count and the architecture. THREADS defaults to 1 (the CPU-scaled setting).
#include <privdiff/engine/device.hpp>
#include <privdiff/evaluation/benchmark_classifiers.hpp>

#include "bench_arguments.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace privdiff::sdk;

namespace {

using privdiff::bench::positive;

constexpr const char* usage =
    "usage: classifier_bench resnet|wrn|resnext cifar|non_cifar CHANNELS SIZE BATCH [REPEATS] [THREADS] [cpu|cuda]\n";

int bench(int argc, char** argv) {
  if (argc < 6) throw std::invalid_argument("expected NETWORK, REGIME, CHANNELS, SIZE and BATCH");
  const auto network = evaluation::benchmark_network_from_string(argv[1]);
  const std::string regime_name = argv[2];
  if (regime_name != "cifar" && regime_name != "non_cifar") {
    throw std::invalid_argument("unknown regime '" + regime_name + "' (cifar or non_cifar)");
  }
  const auto regime =
      regime_name == "cifar" ? evaluation::BenchmarkRegime::cifar : evaluation::BenchmarkRegime::non_cifar;
  const std::int64_t channels = positive(argv[3], "CHANNELS"), size = positive(argv[4], "SIZE");
  const std::int64_t batch = positive(argv[5], "BATCH");
  const int repeats = argc > 6 ? static_cast<int>(positive(argv[6], "REPEATS")) : 3;
  at::set_num_threads(argc > 7 ? static_cast<int>(positive(argv[7], "THREADS")) : 1);
  const c10::Device device = engine::resolve_device(argc > 8 ? argv[8] : "cpu");

  torch::manual_seed(0);
  auto net = evaluation::make_benchmark_classifier(network, regime, channels, size, 10);
  net->to(device);
  net->train();
  const auto schedule = evaluation::dpimagebench_schedule(regime, size);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (schedule.optimizer == evaluation::ClassifierSchedule::Optimizer::sgd) {
    optimizer = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(schedule.lr));
  } else {
    optimizer = std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(schedule.lr));
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor images = (at::rand({batch, channels, size, size}, gen) * 2 - 1).to(device);
  const at::Tensor labels = at::randint(0, 10, {batch}, gen, at::kLong).to(device);
  auto step = [&] {
    optimizer->zero_grad();
    at::cross_entropy_loss(net->forward(images), labels).backward();
    optimizer->step();
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  step();  // warm-up: allocations, kernel selection
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    step();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  std::int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  std::printf(
      "{\"network\": \"%s\", \"regime\": \"%s\", \"architecture\": \"%s\", \"parameters\": %lld, \"channels\": %lld, "
      "\"size\": %lld, \"batch\": %lld, \"threads\": %d, \"device\": \"%s\", \"median_seconds_per_step\": %.4f, "
      "\"min_seconds_per_step\": %.4f}\n",
      argv[1], regime_name.c_str(),
      evaluation::describe(evaluation::dpimagebench_architecture(network, regime)).c_str(),
      static_cast<long long>(parameters), static_cast<long long>(channels), static_cast<long long>(size),
      static_cast<long long>(batch), at::get_num_threads(), device.str().c_str(), seconds[seconds.size() / 2],
      seconds.front());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "classifier_bench: %s\n%s", e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classifier_bench: %s\n", e.what());
    return 1;
  }
}
