#pragma once
/// @file
/// Independent random streams from one seed: sampling, noise and the loss's own randomness each get
/// their own generator, so changing one (e.g. the physical batch size, which changes how the loss
/// consumes randomness) never changes the others.

#include <privdiff/sdk_api.hpp>

#include <cstdint>

namespace privdiff::sdk::engine {

enum class SeedStream : std::uint64_t { sampling = 1, noise = 2, loss = 3 };

/// splitmix64 of (seed, stream): well-mixed, distinct seeds for each stream.
PRIVDIFF_SDK_API std::uint64_t derive_seed(std::uint64_t seed, SeedStream stream);

}  // namespace privdiff::sdk::engine
