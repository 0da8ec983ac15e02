#pragma once
/// @file
/// Privacy events: what a mechanism spends, in the algebra of Google's dp_accounting. Accountants
/// evaluate events; the ledger records them.
///
/// Units: a Gaussian event's `noise_multiplier` is sigma / sensitivity (the std of the added noise
/// divided by the L2 sensitivity, e.g. the clipping norm C), not an absolute standard deviation.

#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API PrivacyEvent {
 public:
  enum class Kind {
    no_op,            ///< spends nothing (e.g. an empty composition)
    gaussian,         ///< Gaussian mechanism with noise_multiplier()
    poisson_sampled,  ///< inner() applied to a Poisson subsample with rate sampling_rate()
    self_composed,    ///< inner() composed count() times
    composed,         ///< children() composed in order
  };

  /// Spends nothing.
  static PrivacyEvent no_op();
  /// Throws std::invalid_argument unless noise_multiplier is finite and >= 0.
  static PrivacyEvent gaussian(double noise_multiplier);
  /// Throws std::invalid_argument unless 0 <= sampling_rate <= 1.
  static PrivacyEvent poisson_sampled(double sampling_rate, PrivacyEvent inner);
  /// Throws std::invalid_argument for a negative count.
  static PrivacyEvent self_composed(PrivacyEvent inner, std::int64_t count);
  static PrivacyEvent composed(std::vector<PrivacyEvent> events);

  Kind kind() const { return kind_; }
  double noise_multiplier() const { return noise_multiplier_; }
  double sampling_rate() const { return sampling_rate_; }
  std::int64_t count() const { return count_; }
  /// The wrapped event of poisson_sampled / self_composed.
  const PrivacyEvent& inner() const;
  /// The parts of a composed event.
  const std::vector<PrivacyEvent>& children() const { return children_; }

  /// e.g. `SelfComposed(PoissonSampled(0.01, Gaussian(1.1)), 1000)`.
  std::string to_string() const;
  bool operator==(const PrivacyEvent& other) const;
  bool operator!=(const PrivacyEvent& other) const { return !(*this == other); }

 private:
  PrivacyEvent() = default;
  Kind kind_ = Kind::no_op;
  double noise_multiplier_ = 0.0;
  double sampling_rate_ = 0.0;
  std::int64_t count_ = 0;
  std::vector<PrivacyEvent> children_;
};

}  // namespace privdiff::sdk
