#include <privdiff/engine/seeds.hpp>

namespace privdiff::sdk::engine {

namespace {
std::uint64_t splitmix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
}  // namespace

std::uint64_t derive_seed(std::uint64_t seed, SeedStream stream) {
  // < 2^63: fits torch's signed seed handling
  return splitmix64(seed + 0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(stream) + 1)) >> 1;
}

std::uint64_t chunk_seed(std::uint64_t loss_seed, std::int64_t step, std::int64_t chunk) {
  const std::uint64_t z = splitmix64(loss_seed + 0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(step) + 1));
  return splitmix64(z + 0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(chunk) + 1)) >> 1;
}

}  // namespace privdiff::sdk::engine
