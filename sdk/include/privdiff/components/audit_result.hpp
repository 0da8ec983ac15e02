#pragma once
/// @file
/// What an audit found (Auditor::lower_bound): a value type of the SDK's ground floor, so the auditor
/// interface needs nothing from audit/ (which builds on it).

#include <cstdint>

namespace privdiff::sdk {

/// What an audit of one run's canary scores found.
struct AuditResult {
  std::int64_t canaries = 0;     ///< m
  std::int64_t guesses = 0;      ///< r of the best guessing rule
  std::int64_t correct = 0;      ///< v of it
  double epsilon_lower = 0.0;    ///< the empirical lower bound (Bonferroni-corrected over the rules tried)
  double confidence = 0.95;
};

}  // namespace privdiff::sdk
