#include <privdiff/engine/seeds.hpp>

namespace privdiff::sdk::engine {

std::uint64_t derive_seed(std::uint64_t seed, SeedStream stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(stream) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return (z ^ (z >> 31)) >> 1;  // < 2^63: fits torch's signed seed handling
}

}  // namespace privdiff::sdk::engine
