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

/// The seed of the loss's randomness (diffusion noise levels, augmentation) for physical chunk
/// `chunk` of logical step `step`: a function of the chunk, not of which process trains it or of
/// what came before, so a run gives the same model on 1 or N processes and after a resume.
PRIVDIFF_SDK_API std::uint64_t chunk_seed(std::uint64_t loss_seed, std::int64_t step, std::int64_t chunk);

}  // namespace privdiff::sdk::engine
