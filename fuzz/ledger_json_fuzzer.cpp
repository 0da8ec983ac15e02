// ledger.json (and a single event's JSON): any bytes either parse into a ledger that writes back
// to JSON which parses to the same ledger, or are refused with std::invalid_argument. Anything
// else (a crash, another exception, a sanitizer report) is a finding.
#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const privdiff::sdk::PrivacyLedger ledger = privdiff::sdk::privacy_ledger_from_json(text);
    const std::string again = privdiff::sdk::to_json(ledger);
    if (privdiff::sdk::to_json(privdiff::sdk::privacy_ledger_from_json(again)) != again) std::abort();  // round trip
    if (ledger.steps() < 0) std::abort();
  } catch (const std::invalid_argument&) {
  }
  try {
    (void)privdiff::sdk::privacy_event_from_json(text);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
