#include <privdiff/check/replay_check.hpp>
#include <privdiff/check/record_replay.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk::check {

namespace {
// The audit of logical step `step` (and the two after it), with chunks of `physical` (0: one) and clip norm C.
DpSgdAudit audit_of(const MechanismUnderTest& make, const ReplayCheckOptions& o, std::int64_t step,
                    std::int64_t physical, double clip, const std::string& label) {
  DpSgdAudit a;
  a.name = "step " + std::to_string(step) + ", " +
           (physical > 0 ? "chunks of " + std::to_string(physical) : std::string("one chunk")) + label + o.label;
  a.mechanism = [make, o, physical, step, clip](std::uint64_t seed) {
    MechanismSettings s;
    s.batch_size = o.batch_size;
    s.steps = step + 2;  // step k and the two after it (the next-steps replay)
    s.noise_multiplier = o.noise_multiplier;
    s.seed = seed;
    s.physical_batch_size = physical;
    if (clip != o.max_grad_norm) s.max_grad_norm = clip;
    return make(s);
  };
  a.batch_size = o.batch_size;
  a.max_grad_norm = clip;
  a.step = step;
  a.model = o.model;
  a.x_alone_in_chunk = o.x_alone_in_chunk;
  return a;
}
}  // namespace

Report check_by_record_replay(const MechanismUnderTest& make, const ReplayCheckOptions& o) {
  Report all;
  const bool text = reads_text(o.model);  // a record: an image and its caption
  const ReplayData d = replay_records(random_images(o.records, o.data_seed, o.shape), text);
  std::vector<Neighbour> neighbours = adversarial_neighbours(o.magnitude, o.random_neighbours, o.shape);
  if (text) neighbours = captioned_neighbours(std::move(neighbours), o.shape);
  auto audit = [&](const DpSgdAudit& a) { all.merge(audit_dp_sgd(a, d, neighbours, typical_reference(o.shape))); };
  for (const std::int64_t physical : o.physical_batch_sizes) {
    if (o.x_alone_in_chunk > 0 && physical != o.x_alone_in_chunk) continue;
    for (const std::int64_t step : o.steps) audit(audit_of(make, o, step, physical, o.max_grad_norm, ""));
  }
  if (o.large_clip_factor > 0) {
    char label[64];
    std::snprintf(label, sizeof label, ", C x %g", o.large_clip_factor);
    audit(audit_of(make, o, 1, o.x_alone_in_chunk, o.max_grad_norm * o.large_clip_factor, label));
  }
  return all;
}

}  // namespace privdiff::sdk::check
