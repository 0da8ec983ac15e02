#pragma once
/// @file
/// The noise settings of a mechanism that releases a few statistics rather than training by DP-SGD
/// (central_images, semantic_query, private_evolution): `secure_noise` (default true: the OS CSPRNG)
/// and `seed` (only with secure_noise = false: reproducible noise, for tests, with a caveat on the
/// ledger).

#include <privdiff/components/mechanism.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace privdiff::sdk::engine {

struct PRIVDIFF_SDK_API ReleaseNoise {
  bool secure = true;
  std::optional<std::uint64_t> seed;  ///< reproducible streams' seed (default: the run's)

  /// secure_noise and seed read back; a seed with secure_noise = true is refused, naming the key.
  static ReleaseNoise from(const Config& config);
  /// The stream for `purpose`: the OS CSPRNG's, or reproducible from the seed and the stage's position,
  /// in which case the ledger carries the reproducible-noise caveat.
  RandomStream stream(StageContext& context, StreamPurpose purpose) const;
};

/// The keys secure_noise (documented as `what`, e.g. "noise and subsamples") and seed.
PRIVDIFF_SDK_API Schema& add_release_noise_keys(Schema& schema, const std::string& what = "noise");

}  // namespace privdiff::sdk::engine
