#include <privdiff/engine/gaussian_noise.hpp>

#include <privdiff/engine/chacha_blocks.hpp>
#include <privdiff/engine/normal_transform.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

namespace privdiff::sdk::engine {

namespace {

constexpr std::uint64_t slice_blocks = 256;          // keystream per pass: 16 KiB, used while in cache
constexpr std::uint64_t blocks_per_thread = 16384;   // ~2 ms of work: less is not worth a thread

// The CPU generator on at::get_num_threads() threads. Plain threads, not at::parallel_for: its
// OpenMP loop is compiled into the caller and runs serially without -fopenmp, as here. Slices are
// handed out one at a time, not a range per thread: a core that is shared (with another process, or
// with LibTorch's OpenMP workers, which spin for milliseconds after each parallel operation) then
// simply takes fewer.
at::Tensor cpu_noise_values(const KeystreamBlocks& run, double std) {
  at::Tensor values = at::empty({static_cast<std::int64_t>(2 * run.count)}, at::kDouble);
  double* out = values.data_ptr<double>();
  const auto threads = static_cast<std::uint64_t>(std::max(1, at::get_num_threads()));
  const std::uint64_t workers = std::clamp<std::uint64_t>(run.count / blocks_per_thread, 1, threads);
  const std::uint64_t slices = (run.count + slice_blocks - 1) / slice_blocks;
  std::atomic<std::uint64_t> next{0};
  std::vector<std::vector<std::uint32_t>> words(workers, std::vector<std::uint32_t>(16 * slice_blocks));
  auto work = [&](std::uint64_t w) {
    for (std::uint64_t i = next++; i < slices; i = next++) {
      const std::uint64_t b = i * slice_blocks, n = std::min(slice_blocks, run.count - b);
      keystream_words(KeystreamBlocks{run.key, run.stream_id, run.first + b, n}, words[w].data());
      noise_values_from_words(words[w].data(), n, std, out + 2 * b);
    }
  };
  std::vector<std::thread> pool;
  for (std::uint64_t w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the running ones take the remaining slices
    }
  }
  work(0);
  for (auto& t : pool) t.join();
  return values;
}

// Tensor i of `likes` takes its numel values from the start of its own blocks (2 values a block).
std::vector<at::Tensor> shape_like(at::Tensor values, const std::vector<at::Tensor>& likes) {
  const bool one_dtype = std::all_of(likes.begin(), likes.end(),
                                     [&](const at::Tensor& t) { return t.scalar_type() == likes.front().scalar_type(); });
  if (!likes.empty() && one_dtype) values = values.to(likes.front().scalar_type());  // one cast, not one per tensor
  std::vector<at::Tensor> out;
  std::int64_t offset = 0;
  for (const at::Tensor& like : likes) {
    const std::int64_t n = like.numel();
    out.push_back(values.narrow(0, offset, n).view(like.sizes()).to(like.options().requires_grad(false)));
    offset += n + (n & 1);
  }
  return out;
}

}  // namespace

at::Tensor device_noise_values(const KeystreamBlocks& run, double std, const c10::Device& device,
                               std::uint64_t max_blocks) {
  if (max_blocks == 0) throw std::invalid_argument("device_noise_values: max_blocks must be positive");
  if (run.count <= max_blocks) return noise_values_from_words(keystream_words(run, device), std);
  at::Tensor values = at::empty({static_cast<std::int64_t>(2 * run.count)}, at::TensorOptions(device).dtype(at::kDouble));
  for (std::uint64_t b = 0; b < run.count; b += max_blocks) {
    const std::uint64_t n = std::min(max_blocks, run.count - b);
    const KeystreamBlocks part{run.key, run.stream_id, run.first + b, n};
    values.narrow(0, static_cast<std::int64_t>(2 * b), static_cast<std::int64_t>(2 * n))
        .copy_(noise_values_from_words(keystream_words(part, device), std));
  }
  return values;
}

GaussianNoise GaussianNoise::seeded(std::uint64_t seed) {
  return GaussianNoise(RandomStream::reproducible(seed, 0, StreamPurpose::noise));
}

GaussianNoise GaussianNoise::secure() { return GaussianNoise(RandomStream::secret(StreamPurpose::noise)); }

NoiseGenerator GaussianNoise::generator_for(const c10::Device& device) {
  return device.is_cpu() ? NoiseGenerator::cpu_lanes : NoiseGenerator::tensor_ops;
}

at::Tensor GaussianNoise::sample(const at::Tensor& like, double std) { return sample_all({like}, std).front(); }

std::vector<at::Tensor> GaussianNoise::sample_all(const std::vector<at::Tensor>& likes, double std) {
  const bool one_device = std::all_of(likes.begin(), likes.end(),
                                      [&](const at::Tensor& t) { return t.device() == likes.front().device(); });
  const c10::Device device = !likes.empty() && one_device ? likes.front().device() : c10::Device(c10::kCPU);
  return sample_all(likes, std, generator_for(device));
}

std::vector<at::Tensor> GaussianNoise::sample_all(const std::vector<at::Tensor>& likes, double std,
                                                  NoiseGenerator generator) {
  std::uint64_t blocks = 0;
  for (const at::Tensor& like : likes) blocks += (static_cast<std::uint64_t>(like.numel()) + 1) / 2;
  const KeystreamBlocks run = stream_.take_blocks(blocks);
  if (generator == NoiseGenerator::cpu_lanes) return shape_like(cpu_noise_values(run, std), likes);
  const c10::Device device = likes.empty() ? c10::Device(c10::kCPU) : likes.front().device();
  return shape_like(device_noise_values(run, std, device), likes);
}

}  // namespace privdiff::sdk::engine
