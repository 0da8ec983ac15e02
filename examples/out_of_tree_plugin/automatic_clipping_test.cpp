// The plugin's own privacy test: the SDK's mechanism checks (record replay, noise, canary audit) run
// automatic_clipping's code, built from its schema as a recipe would build it.
#include "automatic_clipping.hpp"

#include <privdiff/audit/mechanism_check.hpp>
#include <privdiff/privacy/rdp_accountant.hpp>

#include <gtest/gtest.h>

#include <iostream>
#include <memory>

using namespace privdiff::sdk;

TEST(AutomaticClipping, PassesTheMechanismChecks) {
  const check::MechanismUnderTest mechanism = check::mechanism_from_config(
      automatic_clipping::schema(), "stage", {{"batch_size", ConfigValue{std::int64_t{8}}}},
      [](const Config& config) { return std::make_unique<automatic_clipping::AutomaticClipping>(config); });
  const RdpAccountant rdp;  // the SDK's own: no plugins to load
  audit::MechanismCheckOptions options;
  options.accountant = &rdp;  // (c) the canary audit, at epsilon 2
  const audit::MechanismCheck result = audit::check_mechanism(mechanism, options);
  std::cout << result.describe();
  EXPECT_TRUE(result.passed());
}
