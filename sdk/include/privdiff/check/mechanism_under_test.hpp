#pragma once
/// @file
/// The mechanism a check runs: a plugin's own code, built afresh for each run with the settings the
/// check must control (batch size, steps, noise multiplier, seed, chunks) and the recipe's values for
/// everything else. The checks (record_replay.hpp, noise_calibration.hpp, audit/gradient_canaries.hpp)
/// read each step's release from the weights, so they also set plain SGD with lr 1 and no momentum,
/// weight decay, EMA or augmentation, and let every parameter train (the stand-in models have no
/// parameter roles). A mechanism is checkable when its recipe keys include DP-SGD's
/// (engine::dp_sgd_schema): every mechanism derived from DpSgdMechanism with that schema is.

#include <privdiff/components/mechanism.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

/// What a check decides for one run of the mechanism under test.
struct MechanismSettings {
  std::int64_t batch_size = 1;              ///< expected batch size B (q = B / N)
  std::int64_t steps = 1;                   ///< logical steps (0: the length configured, steps or epochs)
  std::optional<double> noise_multiplier;   ///< sigma; empty: "auto" (the check calibrates it)
  std::optional<std::uint64_t> seed;        ///< reproducible streams keyed by it; empty: secure noise
  std::int64_t physical_batch_size = 0;     ///< examples per chunk (0: the whole batch)
  double lr = 1.0;                          ///< plain SGD's learning rate (the noise check takes 1e-3)
  std::optional<double> max_grad_norm;      ///< C; empty: the recipe's
};

/// Builds the mechanism under test for one run.
using MechanismUnderTest = std::function<std::unique_ptr<Mechanism>(const MechanismSettings&)>;

/// The recipe keys a check sets: those of DP-SGD's schema.
PRIVDIFF_SDK_API const std::vector<std::string>& keys_a_check_sets();
/// Of keys_a_check_sets(), those `schema` lacks (empty: the mechanism can be checked).
PRIVDIFF_SDK_API std::vector<std::string> keys_missing_for_check(const Schema& schema);

/// `values` (a mechanism's recipe values) with the check's settings and plain SGD (lr settings.lr), no
/// momentum, decay, EMA or augmentation, every parameter trained.
PRIVDIFF_SDK_API std::map<std::string, ConfigValue> values_for_check(std::map<std::string, ConfigValue> values,
                                                                   const MechanismSettings& settings);

/// A mechanism created by `create` from `schema` and the recipe's `values` with each run's settings
/// (a plugin's own constructor; `path` names the recipe section in messages).
PRIVDIFF_SDK_API MechanismUnderTest mechanism_from_config(Schema schema, std::string path,
                                                          std::map<std::string, ConfigValue> values,
                                                          std::function<std::unique_ptr<Mechanism>(const Config&)> create);

/// `options` with a check's settings (and SGD, lr 1, ... as values_for_check).
PRIVDIFF_SDK_API engine::DpSgdOptions options_for_check(engine::DpSgdOptions options, const MechanismSettings& settings);

/// The engine class T (DpSgdMechanism or one derived from it, constructed from DpSgdOptions) with
/// `options` and each run's settings.
template <class T = engine::DpSgdMechanism>
MechanismUnderTest engine_under_test(engine::DpSgdOptions options) {
  return [options](const MechanismSettings& settings) -> std::unique_ptr<Mechanism> {
    return std::make_unique<T>(options_for_check(options, settings));
  };
}

}  // namespace privdiff::sdk::check
