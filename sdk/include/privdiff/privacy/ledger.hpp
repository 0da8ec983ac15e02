#pragma once
/// @file
/// The privacy ledger of a run: every event actually spent, in order, run-length compressed
/// (a thousand identical steps are one SelfComposed(step, 1000) entry). It is never reset.
///
/// Caveats are conditions outside the accounting under which the events' guarantee holds (e.g.
/// "noise from a published seed: holds only while the seed stays secret"); none means the
/// guarantee is unconditional. They travel with the ledger into every report.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
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
  /// Entries recorded, a SelfComposed run counting its repetitions (logical steps, for DP-SGD). Of
  /// two ledgers of one run, the one with more steps holds everything the other does.
  std::int64_t steps() const;

  /// Marks the start of a logical step: the events recorded from here on are that step's (for
  /// separately_sampled). engine::DpSgdMechanism::run calls it at the start of its stage and after
  /// every step.
  void begin_step() { step_events_.clear(); }
  /// When the events recorded since begin_step() hold two or more PoissonSampled events of one
  /// sampling rate, a sentence saying so (else empty). Two releases of ONE Poisson batch recorded that
  /// way under-count epsilon: they are one subsampled mechanism, PoissonSampled(q, Composed([...]))
  /// (engine::DpSgdMechanism::step_releases states them so). Two independent batches of one rate are
  /// rightly two events, which the ledger cannot tell apart in general; a DP-SGD step has one batch,
  /// so DpSgdMechanism::run refuses the form (std::logic_error with this sentence), and the checks
  /// report that error.
  std::string separately_sampled() const;

  /// Adds a caveat (once: an equal caveat already present is not repeated).
  void add_caveat(const std::string& caveat);
  const std::vector<std::string>& caveats() const { return caveats_; }

 private:
  std::vector<PrivacyEvent> entries_;
  std::vector<std::string> caveats_;
  std::vector<PrivacyEvent> step_events_;  // since begin_step(), each recorded `times` times in a row
};

}  // namespace privdiff::sdk
