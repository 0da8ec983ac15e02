// Time per DP-SGD step on DPDM's Fashion-MNIST UNet (28x28, 32 channels, multipliers 1,2,2, two
// blocks, attention at 7: ~1.75M parameters), per physical batch and noise multiplicity K:
//   nonprivate  forward + ordinary backward of the mean loss
//   vectorised  forward + clipped per-example gradient sum (fast gradient clipping) with each layer's
//               norm strategy timed on the warm-up step (calibrated NormPlanner)
//   materialised_norms  the same with every layer's per-example gradients formed for its norms
//               (privdiff 0.10's engine)
//   micro_batch one example at a time, clipped and summed as it goes (the micro-batch path)
//   auto        the DP step as a stage runs it: path and chunk chosen by calibrate_engine on the
//               warm-up, the batch then split into chunks of the chosen size
//   dp_step     auto, then the step's noise (secure stream) and an Adam update: the whole private
//               step, with its parts ("parts": forward+backward, norms, clipped sum, noise, optimizer)
//   dp_step_automatic_clipping  dp_step with automatic clipping's rule, R / (||g|| + 0.01), as a
//               plugin's DpSgdMechanism::clip_factors (examples/out_of_tree_plugin) runs it
//   materialised forward + all per-example gradients held at once + clipping and summation
//   oracle      one example at a time through autograd, all gradients held (the test reference)
//   noise        the Gaussian noise of one logical step for every parameter (secure ChaCha20 stream,
//                GaussianNoise::sample_all: vectorised loops on the CPU, tensor operations on a GPU)
//   device_noise the same noise from the tensor-operation generator, also on the CPU (for comparison)
//   adam         a stage's optimizer step and weight average (MultiTensorAdam, update_moving_average)
//   libtorch_adam the same with LibTorch's per-tensor Adam and average (privdiff 0.11's)
// PRIVDIFF_BENCH_PROFILE=FILE also writes a profile of the timed steps (see ProfiledSteps).
// PRIVDIFF_BENCH_CLIP_PASSES=one|two: the vectorised path's backward passes for auto and dp_step
// (fast_gradient_clipping.hpp); default one, as a stage's.
// Usage: engine_bench MODE BATCH K [REPEATS] [cpu|cuda] [float32|tf32|bf16] [dpdm|quickstart]
//   (quickstart: the quickstart's 281k UNet, 16 channels x(1,2,2), one block)  -> one JSON line with the median seconds per
// step, rows per second and the peak memory (resident on the CPU; the caching allocator's peak on
// a GPU). Run one configuration per process; bench/run_engine_bench.sh runs them all (CPU table) and
// bench/run_gpu_bench.sh the GPU table.
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/device.hpp>
#include <privdiff/engine/engine_path.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/host_allocator.hpp>
#include <privdiff/engine/micro_batch_clipping.hpp>
#include <privdiff/engine/multi_tensor_adam.hpp>
#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/engine/precision.hpp>
#include <privdiff/engine/private_gradient.hpp>
#include <privdiff/engine/per_example_gradients.hpp>

#include "bench_arguments.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#ifdef PRIVDIFF_BENCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
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

// PRIVDIFF_BENCH_PROFILE=FILE: the timed steps' operators in a Chrome trace (LibTorch's Kineto
// profiler, with input shapes), privdiff's phases named privdiff::... (bench/profile_summary.py
// sums it up). The profiler slows autograd's many small operators several-fold: read shares
// within a phase, not the step's time. On a GPU the trace holds the kernels too (CUPTI), each tied
// to the operator that launched it.
class ProfiledSteps {
 public:
  ProfiledSteps(std::string path, const c10::Device& device) : path_(std::move(path)) {
    if (device.is_cuda()) activities_.insert(torch::profiler::impl::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config_, activities_);
    torch::autograd::profiler::enableProfiler(config_, activities_);
  }
  ~ProfiledSteps() { torch::autograd::profiler::disableProfiler()->save(path_); }
  ProfiledSteps(const ProfiledSteps&) = delete;
  ProfiledSteps& operator=(const ProfiledSteps&) = delete;

 private:
  std::string path_;
  torch::profiler::impl::ProfilerConfig config_{torch::profiler::impl::ProfilerState::KINETO, true};
  std::set<torch::profiler::impl::ActivityType> activities_{torch::profiler::impl::ActivityType::CPU};
};

}  // namespace

constexpr const char* usage =
    "usage: engine_bench nonprivate|vectorised|materialised_norms|micro_batch|auto|dp_step|materialised|oracle|noise|device_noise|adam|libtorch_adam "
    "BATCH K [REPEATS] [cpu|cuda] [float32|tf32|bf16] [dpdm|quickstart]\n";

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
  const std::string allocator = engine::reuse_freed_host_memory();  // as privdiff's main does
  if (argc < 4) throw std::invalid_argument("expected a mode, BATCH and K");
  const std::string mode = argv[1];
  const std::vector<std::string> modes{"nonprivate", "vectorised", "materialised_norms", "micro_batch", "auto",
                                       "dp_step", "dp_step_automatic_clipping", "materialised", "oracle", "noise", "device_noise", "adam", "libtorch_adam"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    throw std::invalid_argument("unknown mode '" + mode + "'");
  }
  const std::int64_t batch = positive(argv[2], "BATCH"), k = positive(argv[3], "K");
  const int repeats = argc > 4 ? static_cast<int>(positive(argv[4], "REPEATS")) : 3;
  const c10::Device device = engine::resolve_device(argc > 5 ? argv[5] : "cpu");
  const engine::Precision precision = engine::precision_from_string(argc > 6 ? argv[6] : "float32");
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  // Every core, or $OMP_NUM_THREADS when set (as privdiff's threads = 0)
  const char* omp = std::getenv("OMP_NUM_THREADS");
  at::set_num_threads(omp && std::atoi(omp) > 0 ? std::atoi(omp)
                                                : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  torch::manual_seed(0);
  diffusion::UnetConfig config;
  const std::string model = argc > 7 ? argv[7] : "dpdm";
  if (model == "quickstart") {
    config.channels = 16;
    config.num_res_blocks = 1;
  } else if (model != "dpdm") {
    throw std::invalid_argument("unknown model '" + model + "' (dpdm or quickstart)");
  }
  diffusion::Unet unet(config);
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
    const engine::PrecisionScope scope(precision, device);
    const at::Tensor out = unet.forward(noisy / at::sqrt(sigma.pow(2) + 1.0 / 3).view({-1, 1, 1, 1}), sigma.log() / 4, y);
    return (out.to(at::kFloat) - x).pow(2).flatten(1).mean(1);
  };

  engine::NormPlanner planner(mode == "materialised_norms" ? engine::NormPlanner::Mode::fixed
                                                           : engine::NormPlanner::Mode::calibrate);
  engine::EnginePlan plan;
  bool planned = false;
  std::map<std::string, double> parts;  // of the step being timed (dp_step)
  auto step_noise = engine::GaussianNoise::secure();
  engine::MultiTensorAdam adam(unet.parameters(), torch::optim::AdamOptions(1e-4));
  torch::optim::Adam libtorch_adam(unet.parameters(), torch::optim::AdamOptions(1e-4));
  std::vector<at::Tensor> average;  // adam, libtorch_adam: the weights' moving average, as a stage keeps it
  if (mode == "adam" || mode == "libtorch_adam") {
    for (auto& p : unet.parameters()) {
      p.mutable_grad() = at::randn_like(p);
      average.push_back(p.detach().clone());
    }
  }
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [&](Clock::time_point t) {
    sync();
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const bool whole_step = mode == "dp_step" || mode == "dp_step_automatic_clipping";
  const char* passes_env = std::getenv("PRIVDIFF_BENCH_CLIP_PASSES");
  const engine::ClipPasses passes = passes_env ? engine::clip_passes_from_string(passes_env) : engine::ClipPasses::one;
  engine::ClipRule rule;
  if (mode == "dp_step_automatic_clipping") {
    rule = [](const at::Tensor& squared) { return 1.0 / (squared.sum(1).sqrt() + 0.01); };
  }
  auto step = [&] {
    parts.clear();
    if (mode == "auto" || whole_step) {
      if (!planned) {  // the warm-up step: what a stage does before its first step
        engine::EngineCalibration settings;
        settings.synthetic_loss = [&](std::int64_t) { return loss; };
        settings.chunk = batch;
        settings.may_shrink_chunk = true;
        settings.group = k;
        settings.rule = rule;
        settings.passes = passes;
        plan = engine::calibrate_engine(unet, settings, planner);
        planned = true;
        for (const auto& [key, value] : plan.describe(planner)) std::fprintf(stderr, "%s: %s\n", key.c_str(), value.c_str());
      }
      const auto clipping_start = Clock::now();
      engine::PrivateGradient sum(unet.parameters(), 1.0, engine::ClipMode::flat);  // as a stage's step
      for (std::int64_t start = 0; start < batch; start += plan.chunk) {
        const std::int64_t len = std::min(plan.chunk, batch - start);
        const engine::RowLoss part = [&, start](const at::Tensor& e) { return loss(e + start); };
        engine::ClippedSum chunk = engine::clipped_sum_along(plan, unet, part, len, k, 1.0, engine::ClipMode::flat, planner, rule);
        for (const auto& [name, value] : chunk.seconds) parts[name] += value;
        sum.add_clipped(chunk, len);
      }
      parts["clipping_total"] = seconds_since(clipping_start);  // the micro-batch path has no finer parts
      if (whole_step) {  // the step's noise, added and divided by the expected batch size, then Adam
        auto t = Clock::now();
        sum.finish_into_grads(1.0, static_cast<double>(batch), step_noise);
        parts["noise_and_divide"] = seconds_since(t);
        t = Clock::now();
        adam.step();
        parts["optimizer"] = seconds_since(t);
      }
    } else if (mode == "vectorised" || mode == "materialised_norms") {
      engine::clipped_gradient_sum(unet, loss, batch, k, 1.0, engine::ClipMode::flat, planner);
    } else if (mode == "micro_batch") {
      engine::micro_batch_clipped_sum(unet, loss, batch, k, 1.0, engine::ClipMode::flat);
    } else if (mode == "nonprivate") {
      unet.zero_grad();
      loss(at::arange(batch, at::kLong)).reshape({batch, k}).mean(1).mean().backward();
    } else if (mode == "materialised") {
      const auto grads = engine::per_example_gradients(unet, loss, batch, k);
      engine::clip_and_sum(grads, 1.0, engine::ClipMode::flat);
    } else if (mode == "adam") {
      adam.step();
      engine::update_moving_average(average, unet.parameters(), 0.999);
    } else if (mode == "libtorch_adam") {
      libtorch_adam.step();
      at::NoGradGuard no_grad;
      const auto params = unet.parameters();
      for (std::size_t j = 0; j < params.size(); ++j) average[j].mul_(0.999).add_(params[j].detach(), 1 - 0.999);
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
  std::vector<std::pair<double, std::map<std::string, double>>> times;  // each step's time and parts
  std::optional<ProfiledSteps> profile;
  if (const char* path = std::getenv("PRIVDIFF_BENCH_PROFILE")) profile.emplace(path, device);
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    step();
    sync();
    times.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), parts);
  }
  profile.reset();  // writes the trace
  std::sort(times.begin(), times.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const double median = times[times.size() / 2].first;
  std::string parts_json;
  for (const auto& [name, value] : times[times.size() / 2].second) {
    parts_json += (parts_json.empty() ? "" : ", ") + ("\"" + name + "\": " + std::to_string(value));
  }
  std::string plan_json;  // auto, dp_step: what the calibration chose (path, chunk, passes, norm strategies)
  if (planned) {
    for (const auto& [key, value] : plan.describe(planner)) {
      plan_json += (plan_json.empty() ? "" : ", ") + ("\"" + key + "\": \"" + value + "\"");
    }
  }
  std::string shapes_json;
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& p : unet.parameters()) shapes.emplace_back(p.sizes().begin(), p.sizes().end());
  std::sort(shapes.begin(), shapes.end());
  for (const auto& shape : shapes) {
    std::string dims;
    for (auto d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    shapes_json += (shapes_json.empty() ? "[" : ", [") + dims + "]";
  }
  std::printf("{\"mode\": \"%s\", \"device\": \"%s\", \"batch\": %lld, \"k\": %lld, \"parameters\": %lld, "
              "\"threads\": %d, \"precision\": \"%s\", \"seconds_per_step\": %.5f, \"rows_per_second\": %.0f, \"peak_rss_mib\": %.0f, "
              "\"clip_passes\": \"%s\", \"plan\": {%s}, \"allocator\": \"%s\", \"parts\": {%s}, \"shapes\": [%s]}\n",
              mode.c_str(), device.str().c_str(), static_cast<long long>(batch), static_cast<long long>(k),
              static_cast<long long>(unet.parameter_count()), at::get_num_threads(), engine::to_string(precision).c_str(), median,
              static_cast<double>(batch * k) / median, peak_device_mib(device),
              engine::to_string(passes).c_str(), plan_json.c_str(), allocator.c_str(), parts_json.c_str(), shapes_json.c_str());
  return 0;
}
