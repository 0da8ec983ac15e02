#pragma once
/// @file
/// The privacy ledger of a run: every event actually spent, in order, run-length compressed
/// (a thousand identical steps are one SelfComposed(step, 1000) entry). It is never reset.

#include <privdiff/privacy/event.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API PrivacyLedger {
 public:
  /// Records `event` spent `times` times in a row (times >= 1); merges it into the last entry when
  /// that entry is the same event (or a SelfComposed of it).
  void record(const PrivacyEvent& event, std::int64_t times = 1);
  /// The entries, each a single event or a SelfComposed run.
  const std::vector<PrivacyEvent>& entries() const { return entries_; }
  /// Everything spent as one event (no_op when empty).
  PrivacyEvent total() const;

 private:
  std::vector<PrivacyEvent> entries_;
};

}  // namespace privdiff::sdk
