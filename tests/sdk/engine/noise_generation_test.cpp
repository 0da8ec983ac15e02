// How DP-SGD's noise is generated: the vectorised CPU keystream and the tensor-operation keystream
// against RandomStream::block (itself checked against RFC 8439), the CPU loops and the tensor
// operations of the transform against each other bit for bit, sample_all against one sample()
// after another, and the result against N(0, std^2).
#include <privdiff/engine/chacha_blocks.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/engine/normal_transform.hpp>
#include <privdiff/engine/random_stream.hpp>

#include <ATen/ATen.h>
#include <torch/version.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using namespace privdiff::sdk::engine;

namespace {

const RandomStream::Key key{0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c,
                            0x13121110, 0x17161514, 0x1b1a1918, 0x1f1e1d1c};  // RFC 8439 §2.3.2

// Word w of block `counter`, from the scalar block function
std::uint32_t reference_word(std::uint64_t stream_id, std::uint64_t counter, int w) {
  const auto block = RandomStream::block(key, stream_id, counter);
  std::uint32_t v;
  std::memcpy(&v, block.data() + 4 * w, 4);  // little-endian, as on every machine we build for
  return v;
}

// First blocks of the runs tried: 0, a carry into the counter's high word, the end of the counter.
const std::vector<std::uint64_t> firsts{0, 7, 0xFFFFFFFFull - 5, UINT64_MAX - 40};
const std::vector<std::uint64_t> counts{1, 2, 15, 16, 17, 33};

// Equal bits (not only equal values: +0 and -0 differ here)
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const auto as_int = a.element_size() == 8 ? at::kLong : at::kInt;
  return at::equal(a.contiguous().view(as_int), b.contiguous().view(as_int));
}

// The tensor-operation generator against the CPU loops. LibTorch 1.13's CPU kernels round every
// operation as the loops do: the same bits. LibTorch 2.x's (measured with 2.15) differ from the scalar
// operations in the last bit of some square roots and sums (1.3 % and 0.4 % of values), so there the
// two generators agree to a few units in the last place of the sum's terms: the same Gaussian to far below the
// floating-point caveat of every Gaussian mechanism, but not bit for bit across devices.
// Tolerance: a few units in the last place of the largest term of the sum, r·cos ≤ 8.6 (u ≥ 2^-53)
// times `std` — relative to the value itself it would fail where the four normals nearly cancel.
bool same_noise(const at::Tensor& a, const at::Tensor& b, double std) {
#if TORCH_VERSION_MAJOR < 2
  (void)std;
  return same_bits(a, b);
#else
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const double ulp = a.scalar_type() == at::kDouble ? 0x1p-52 : 0x1p-23;
  const double worst = (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
  return worst <= 8 * ulp * 8.6 * std;
#endif
}

std::vector<at::Tensor> likes() {
  return {at::zeros({}), at::zeros({0}), at::zeros({1}, at::kDouble), at::zeros({7}),
          at::zeros({3, 5}, at::kDouble), at::zeros({2, 3, 4, 5}), at::zeros({1001}, at::kDouble)};
}

// sample() as privdiff 0.10 wrote it, on RandomStream::standard_normals: the scalar reference.
at::Tensor reference_sample(RandomStream& stream, const at::Tensor& like, double std) {
  const auto n = static_cast<std::size_t>(like.numel());
  const std::vector<double> a = stream.standard_normals(4 * n);
  at::Tensor z = at::empty(like.sizes(), at::kDouble);
  double* dst = z.data_ptr<double>();
  for (std::size_t i = 0; i < n; ++i) dst[i] = (a[4 * i] + a[4 * i + 1] + a[4 * i + 2] + a[4 * i + 3]) / 2;
  return (z * std).to(like.scalar_type());
}

}  // namespace

TEST(ChaCha20Lanes, EqualTheBlockFunctionForAnyRunOfBlocks) {
  for (const std::uint64_t stream_id : {std::uint64_t{0x4a000000}, std::uint64_t{0x0123456789abcdef}}) {
    for (const std::uint64_t first : firsts) {
      for (const std::uint64_t count : counts) {
        std::vector<std::uint32_t> words(16 * count);
        keystream_words(KeystreamBlocks{key, stream_id, first, count}, words.data());
        for (std::uint64_t b = 0; b < count; ++b) {
          for (int w = 0; w < 16; ++w) {
            ASSERT_EQ(words[16 * b + static_cast<std::uint64_t>(w)], reference_word(stream_id, first + b, w))
                << "first " << first << ", block " << b << ", word " << w;
          }
        }
      }
    }
  }
}

TEST(ChaCha20TensorOps, EqualTheBlockFunctionForAnyRunOfBlocks) {
  EXPECT_EQ(keystream_words(KeystreamBlocks{key, 1, 0, 0}, at::kCPU).sizes(), (std::vector<std::int64_t>{0, 16}));
  for (const std::uint64_t first : firsts) {
    for (const std::uint64_t count : counts) {
      const at::Tensor words = keystream_words(KeystreamBlocks{key, 0x4a000000, first, count}, at::kCPU);
      ASSERT_EQ(words.scalar_type(), at::kLong);
      ASSERT_EQ(words.sizes(), (std::vector<std::int64_t>{static_cast<std::int64_t>(count), 16}));
      const auto* p = words.data_ptr<std::int64_t>();
      for (std::uint64_t b = 0; b < count; ++b) {
        for (int w = 0; w < 16; ++w) {
          ASSERT_EQ(p[16 * b + static_cast<std::uint64_t>(w)], reference_word(0x4a000000, first + b, w))
              << "first " << first << ", block " << b << ", word " << w;
        }
      }
    }
  }
}

TEST(NoiseTransform, TensorOperationsEqualTheLoopsBitForBit) {
  for (const std::uint64_t blocks : {1, 3, 64, 65, 1000}) {
    std::vector<std::uint32_t> words(16 * blocks);
    RandomStream::reproducible(blocks, 0, StreamPurpose::noise).fill(words.data(), 4 * words.size());
    at::Tensor loops = at::empty({static_cast<std::int64_t>(2 * blocks)}, at::kDouble);
    noise_values_from_words(words.data(), blocks, 0.7, loops.data_ptr<double>());
    const at::Tensor as_tensor =
        at::tensor(std::vector<std::int64_t>(words.begin(), words.end()), at::kLong).reshape({-1, 16});
    EXPECT_TRUE(same_noise(noise_values_from_words(as_tensor, 0.7), loops, 0.7)) << blocks << " blocks";
  }
}

TEST(GaussianNoise, TensorOperationsGiveTheSameNoiseAsTheCpuGenerator) {
  auto a = GaussianNoise::seeded(11), b = GaussianNoise::seeded(11);
  const auto cpu = a.sample_all(likes(), 1.7, NoiseGenerator::cpu_lanes);
  const auto ops = b.sample_all(likes(), 1.7, NoiseGenerator::tensor_ops);
  ASSERT_EQ(cpu.size(), likes().size());
  for (std::size_t j = 0; j < cpu.size(); ++j) {
    EXPECT_EQ(cpu[j].sizes(), likes()[j].sizes());
    EXPECT_EQ(cpu[j].scalar_type(), likes()[j].scalar_type());
    EXPECT_TRUE(same_noise(cpu[j], ops[j], 1.7)) << "tensor " << j;
  }
  EXPECT_TRUE(at::equal(a.state(), b.state()));  // the counters moved alike
  EXPECT_TRUE(same_bits(a.sample(at::zeros({9}), 1.0), b.sample(at::zeros({9}), 1.0)));
  EXPECT_EQ(GaussianNoise::generator_for(at::kCPU), NoiseGenerator::cpu_lanes);
  EXPECT_EQ(GaussianNoise::generator_for(c10::Device(c10::kCUDA, 0)), NoiseGenerator::tensor_ops);
}

TEST(GaussianNoise, TheTensorOperationGeneratorSplitsLongRunsWithoutChangingTheNoise) {
  const KeystreamBlocks run{key, 2, 1000, 37};
  const at::Tensor whole = device_noise_values(run, 0.9, at::kCPU);
  ASSERT_EQ(whole.numel(), 74);
  for (const std::uint64_t at_most : {1, 5, 36}) {
    EXPECT_TRUE(same_bits(device_noise_values(run, 0.9, at::kCPU, at_most), whole)) << at_most << " blocks at a time";
  }
  EXPECT_THROW(device_noise_values(run, 0.9, at::kCPU, 0), std::invalid_argument);
}

TEST(GaussianNoise, SampleAllEqualsOneSampleAfterAnother) {
  auto a = GaussianNoise::seeded(12), b = GaussianNoise::seeded(12);
  const auto all = a.sample_all(likes(), 0.3);
  for (std::size_t j = 0; j < all.size(); ++j) EXPECT_TRUE(same_bits(all[j], b.sample(likes()[j], 0.3))) << j;
  EXPECT_TRUE(at::equal(a.state(), b.state()));
  EXPECT_TRUE(a.sample_all({}, 1.0).empty());
  EXPECT_TRUE(at::equal(a.state(), b.state()));  // no tensors, no blocks
}

TEST(GaussianNoise, CpuGeneratorEqualsTheScalarReferenceOnAnyNumberOfThreads) {
  const int threads = at::get_num_threads();
  const std::vector<at::Tensor> big{at::zeros({300001}), at::zeros({5}, at::kDouble), at::zeros({70000}, at::kDouble)};
  for (int t : {1, 2, 3}) {
    at::set_num_threads(t);  // 3: ranges of uneven length
    auto noise = GaussianNoise(RandomStream::reproducible(5, 2, StreamPurpose::noise));
    RandomStream reference = RandomStream::reproducible(5, 2, StreamPurpose::noise);
    const auto got = noise.sample_all(big, 2.5);
    for (std::size_t j = 0; j < big.size(); ++j) {
      EXPECT_TRUE(same_bits(got[j], reference_sample(reference, big[j], 2.5))) << t << " threads, tensor " << j;
    }
    EXPECT_TRUE(at::equal(noise.state(), reference.state()));
  }
  at::set_num_threads(threads);
}

TEST(GaussianNoise, IsNormalByMeanVarianceTailsAndKolmogorovSmirnov) {
  const std::int64_t n = 1000000;
  const at::Tensor z = GaussianNoise::seeded(2024).sample(at::zeros({n}, at::kDouble), 3.0) / 3.0;
  const double se = 1 / std::sqrt(static_cast<double>(n));
  EXPECT_NEAR(z.mean().item<double>(), 0.0, 5 * se);
  EXPECT_NEAR(z.var().item<double>(), 1.0, 5 * std::sqrt(2.0) * se);
  const double beyond_3 = (z.abs() > 3).sum().item<double>() / static_cast<double>(n);  // 2 (1 - Phi(3))
  EXPECT_NEAR(beyond_3, 0.0026998, 5 * std::sqrt(0.0027 / static_cast<double>(n)));
  // Kolmogorov-Smirnov: sup |F_n - Phi| below its 0.1% critical value 1.95 / sqrt(n)
  const at::Tensor sorted = std::get<0>(z.sort());
  const double* x = sorted.data_ptr<double>();
  double d = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double phi = 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
    d = std::max({d, static_cast<double>(i + 1) / n - phi, phi - static_cast<double>(i) / n});
  }
  EXPECT_LT(d, 1.95 * se);
}

TEST(RandomStream, TakeBlocksMovesTheCounterAsFillDoes) {
  RandomStream a = RandomStream::reproducible(3, 0, StreamPurpose::noise), b = a;
  const KeystreamBlocks run = a.take_blocks(5);
  EXPECT_EQ(run.first, 0u);
  EXPECT_EQ(run.count, 5u);
  std::vector<std::uint8_t> skipped(5 * 64 - 10);  // a partial last block is a whole one
  b.fill(skipped.data(), skipped.size());
  EXPECT_EQ(a.words(3), b.words(3));
  RandomStream end(key, 0, UINT64_MAX - 3, false);
  EXPECT_EQ(end.take_blocks(3).first, UINT64_MAX - 3);
  EXPECT_EQ(end.take_blocks(0).count, 0u);
  EXPECT_THROW(end.take_blocks(1), std::runtime_error);  // block 2^64 - 1 is never used, as in fill()
}
