#include <privdiff/engine/release_noise.hpp>

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <stdexcept>

namespace privdiff::sdk::engine {

ReleaseNoise ReleaseNoise::from(const Config& c) {
  ReleaseNoise out;
  out.secure = c.get_bool("secure_noise");
  if (c.has("seed")) {
    if (out.secure) throw KeyValueError(c.path() + ".seed", "only with secure_noise = false (reproducible noise)");
    out.seed = static_cast<std::uint64_t>(c.get_int("seed"));
  }
  return out;
}

RandomStream ReleaseNoise::stream(StageContext& context, StreamPurpose purpose) const {
  if (secure) return RandomStream::secret(purpose);
  context.ledger.add_caveat(reproducible_noise_caveat());
  return RandomStream::reproducible(seed.value_or(context.seed), static_cast<std::uint64_t>(context.stage_index), purpose);
}

Schema& add_release_noise_keys(Schema& schema, const std::string& what) {
  return schema.add(Key::boolean("secure_noise").defaults(true).doc(what + " from the OS CSPRNG (false: from the seed)"))
      .add(Key::integer("seed").at_least(0).optional().doc("only with secure_noise = false"));
}

}  // namespace privdiff::sdk::engine
