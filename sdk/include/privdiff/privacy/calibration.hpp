#pragma once
/// @file
/// Calibration with any accountant: the smallest noise multiplier that meets a privacy target,
/// and the largest number of steps a noise multiplier allows. Both assume epsilon is
/// non-increasing in the noise multiplier and non-decreasing in the step count (true for every
/// event in the algebra), and never return a value whose epsilon exceeds the target.

#include <privdiff/components/accountant.hpp>
#include <privdiff/components/privacy_event.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <functional>

namespace privdiff::sdk {

struct NoiseCalibration {
  double noise_multiplier = 0.0;  ///< sigma / sensitivity
  double epsilon = 0.0;           ///< epsilon it achieves (<= target)
};

/// Smallest noise multiplier sigma, to within a relative `tolerance`, with
/// epsilon(events(sigma), delta) <= target_epsilon. `events(sigma)` builds everything the run
/// spends for that sigma (including other stages' fixed events). Throws std::invalid_argument for
/// bad targets (epsilon outside (0, 1000], delta outside (0, 1)) or events the accountant cannot
/// evaluate, and std::runtime_error when even sigma = `max_noise_multiplier` misses the target.
PRIVDIFF_SDK_API NoiseCalibration calibrate_noise_multiplier(
    const Accountant& accountant, const std::function<PrivacyEvent(double)>& events, double target_epsilon,
    double delta, double tolerance = 1e-3, double max_noise_multiplier = 1e4);

/// Largest step count T in [0, max_steps] with epsilon(events(T), delta) <= target_epsilon.
PRIVDIFF_SDK_API std::int64_t calibrate_steps(const Accountant& accountant,
                                              const std::function<PrivacyEvent(std::int64_t)>& events,
                                              double target_epsilon, double delta,
                                              std::int64_t max_steps = std::int64_t{1} << 40);

}  // namespace privdiff::sdk
