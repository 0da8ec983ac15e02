#pragma once
/// @file
/// JSON form of privacy events and ledgers, stored with every run so any accountant can
/// re-evaluate it later:
///   {"type": "gaussian", "noise_multiplier": 1.1}
///   {"type": "poisson_sampled", "sampling_rate": 0.01, "event": {...}}
///   {"type": "self_composed", "count": 1000, "event": {...}}
///   {"type": "composed", "events": [{...}, ...]}
///   {"type": "no_op"}
/// A ledger is {"format": "privdiff-ledger", "version": 1, "entries": [event, ...], "caveats": [text, ...]}.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/privacy/ledger.hpp>
#include <privdiff/sdk_api.hpp>

#include <string>

namespace privdiff::sdk {

/// Compact JSON, numbers written with full (round-trip) precision.
PRIVDIFF_SDK_API std::string to_json(const PrivacyEvent& event);
/// Throws std::invalid_argument with the JSON path of the first problem.
PRIVDIFF_SDK_API PrivacyEvent privacy_event_from_json(const std::string& json);

/// Pretty-printed ledger document.
PRIVDIFF_SDK_API std::string to_json(const PrivacyLedger& ledger);
/// Throws std::invalid_argument for a malformed or foreign document.
PRIVDIFF_SDK_API PrivacyLedger privacy_ledger_from_json(const std::string& json);

}  // namespace privdiff::sdk
