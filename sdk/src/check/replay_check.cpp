#include <privdiff/check/replay_check.hpp>
#include <privdiff/check/record_replay.hpp>

#include <string>

namespace privdiff::sdk::check {

Report check_by_record_replay(const MechanismUnderTest& make, const ReplayCheckOptions& o) {
  Report all;
  const at::Tensor images = random_images(o.records, o.data_seed);
  for (const std::int64_t physical : o.physical_batch_sizes) {
    for (const std::int64_t step : o.steps) {
      DpSgdAudit a;
      a.name = "step " + std::to_string(step) + ", " +
               (physical > 0 ? "chunks of " + std::to_string(physical) : std::string("one chunk"));
      a.mechanism = [make, o, physical](std::uint64_t seed) {
        MechanismSettings s;
        s.batch_size = o.batch_size;
        s.steps = 2;
        s.noise_multiplier = o.noise_multiplier;
        s.seed = seed;
        s.physical_batch_size = physical;
        return make(s);
      };
      a.batch_size = o.batch_size;
      a.max_grad_norm = o.max_grad_norm;
      a.step = step;
      all.merge(audit_dp_sgd(a, images, adversarial_neighbours(o.magnitude), typical_reference()));
    }
  }
  return all;
}

}  // namespace privdiff::sdk::check
