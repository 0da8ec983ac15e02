#pragma once
/// @file
/// The Rényi-DP accountant as an object: what the `rdp` plugin registers, and what a standalone
/// program or a plugin's own test (audit::check_mechanism's canary audit) can use without loading
/// plugins. Exact at integer and fractional orders (privacy/rdp.hpp), with the improved RDP ->
/// (epsilon, delta) conversion by default and the classic one selectable.

#include <privdiff/components/accountant.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/privacy/rdp.hpp>
#include <privdiff/sdk_api.hpp>

#include <string>
#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API RdpAccountant : public Accountant {
 public:
  /// The default orders (rdp::default_orders()) and the improved conversion.
  RdpAccountant();
  RdpAccountant(std::vector<double> orders, rdp::Conversion conversion);
  /// From a config validated against rdp_accountant_schema().
  explicit RdpAccountant(const Config& config);

  std::string cannot_evaluate(const PrivacyEvent& event) const override;
  /// With the optimal order in the details, and a warning when it is at the edge of the orders.
  EpsilonResult epsilon(const PrivacyEvent& event, double delta) const override;
  double delta(const PrivacyEvent& event, double epsilon) const override;

 private:
  std::vector<double> orders_;
  rdp::Conversion conversion_;
};

/// The `rdp` plugin's recipe keys: orders, conversion.
PRIVDIFF_SDK_API Schema rdp_accountant_schema();

}  // namespace privdiff::sdk
