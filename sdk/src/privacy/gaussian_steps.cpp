#include <privdiff/privacy/gaussian_steps.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

namespace privdiff::sdk {

std::optional<double> same_batch_noise_multiplier(const PrivacyEvent& event) {
  // Gaussian releases of one batch, each of noise multiplier sigma_i (noise std / that release's
  // sensitivity): their mean shifts, 1 / sigma_i in units of each one's std, form one vector of length
  // sqrt(sum 1 / sigma_i^2); a rotation of the joint Gaussian makes it one Gaussian release of that
  // shift, with or without Poisson subsampling of the batch (the same subsample shifts every mean).
  using Kind = PrivacyEvent::Kind;
  double precision = 0;  // sum of 1 / sigma_i^2 (inf: a release without noise)
  bool any = false;
  std::function<bool(const PrivacyEvent&, double)> add = [&](const PrivacyEvent& e, double times) {
    switch (e.kind()) {
      case Kind::no_op: return true;
      case Kind::gaussian:
        any = true;
        precision += e.noise_multiplier() == 0 ? std::numeric_limits<double>::infinity()
                                               : times / (e.noise_multiplier() * e.noise_multiplier());
        return true;
      case Kind::self_composed: return e.count() == 0 || add(e.inner(), times * static_cast<double>(e.count()));
      case Kind::composed:
        for (const auto& c : e.children()) {
          if (!add(c, times)) return false;
        }
        return true;
      case Kind::poisson_sampled: return false;  // another subsample: not one batch
    }
    return false;
  };
  if (!add(event, 1) || !any) return std::nullopt;
  return precision == std::numeric_limits<double>::infinity() ? 0.0 : 1 / std::sqrt(precision);
}

std::string non_gaussian_reason(const PrivacyEvent& event) {
  using Kind = PrivacyEvent::Kind;
  switch (event.kind()) {
    case Kind::no_op:
    case Kind::gaussian: return "";
    case Kind::poisson_sampled:
      // q = 0 spends nothing and q = 1 is no subsampling at all, whatever the inner event.
      if (event.sampling_rate() == 0) return "";
      if (event.sampling_rate() == 1) return non_gaussian_reason(event.inner());
      if (event.inner().kind() == Kind::gaussian || event.inner().kind() == Kind::no_op) return "";
      if (same_batch_noise_multiplier(event.inner())) return "";  // releases of one batch: one Gaussian
      return "cannot evaluate a Poisson-subsampled " + event.inner().to_string() +
             " (only Gaussian events, each possibly Poisson-subsampled, and compositions of Gaussians on one "
             "Poisson-subsampled batch have an analysis here)";
    case Kind::self_composed: return non_gaussian_reason(event.inner());
    case Kind::composed:
      for (const auto& c : event.children()) {
        if (auto why = non_gaussian_reason(c); !why.empty()) return why;
      }
      return "";
  }
  return "unknown event";
}

namespace {

void add(std::map<std::pair<double, double>, std::int64_t>& steps, std::pair<double, double> key, std::int64_t times) {
  std::int64_t& count = steps[key];
  if (__builtin_add_overflow(count, times, &count)) throw std::invalid_argument("privacy event: step count overflows");
}

void collect(const PrivacyEvent& e, std::int64_t times, std::map<std::pair<double, double>, std::int64_t>& steps) {
  using Kind = PrivacyEvent::Kind;
  switch (e.kind()) {
    case Kind::no_op: return;
    case Kind::gaussian: add(steps, {1.0, e.noise_multiplier()}, times); return;
    case Kind::poisson_sampled:
      if (e.sampling_rate() == 1) collect(e.inner(), times, steps);
      else if (e.sampling_rate() > 0 && e.inner().kind() == Kind::gaussian) {
        add(steps, {e.sampling_rate(), e.inner().noise_multiplier()}, times);
      } else if (e.sampling_rate() > 0) {
        if (const auto sigma = same_batch_noise_multiplier(e.inner())) add(steps, {e.sampling_rate(), *sigma}, times);
      }
      return;
    case Kind::self_composed: {
      std::int64_t product;
      // An overflowing count would wrap to a small one and under-report the privacy spent.
      if (__builtin_mul_overflow(times, e.count(), &product)) {
        throw std::invalid_argument("privacy event: step count overflows (" + e.to_string() + ")");
      }
      if (product > 0) collect(e.inner(), product, steps);
      return;
    }
    case Kind::composed:
      for (const auto& c : e.children()) collect(c, times, steps);
      return;
  }
}

}  // namespace

std::vector<GaussianSteps> gaussian_steps(const PrivacyEvent& event) {
  if (auto why = non_gaussian_reason(event); !why.empty()) throw std::invalid_argument(why);
  std::map<std::pair<double, double>, std::int64_t> merged;
  collect(event, 1, merged);
  std::vector<GaussianSteps> out;
  for (const auto& [key, count] : merged) out.push_back({key.first, key.second, count});
  return out;
}

}  // namespace privdiff::sdk
