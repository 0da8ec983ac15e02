#include <privdiff/privacy/ledger.hpp>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace privdiff::sdk {

void PrivacyLedger::record(const PrivacyEvent& event, std::int64_t times) {
  if (times < 1) throw std::invalid_argument("PrivacyLedger::record: times must be >= 1");
  for (std::int64_t i = 0; i < std::min<std::int64_t>(times, 2); ++i) step_events_.push_back(event);
  if (!entries_.empty()) {
    PrivacyEvent& last = entries_.back();
    if (last == event) {
      last = PrivacyEvent::self_composed(event, 1 + times);
      return;
    }
    if (last.kind() == PrivacyEvent::Kind::self_composed && last.inner() == event) {
      last = PrivacyEvent::self_composed(event, last.count() + times);
      return;
    }
  }
  entries_.push_back(times == 1 ? event : PrivacyEvent::self_composed(event, times));
}

PrivacyEvent PrivacyLedger::total() const {
  if (entries_.empty()) return PrivacyEvent::no_op();
  if (entries_.size() == 1) return entries_.front();
  return PrivacyEvent::composed(entries_);
}

std::int64_t PrivacyLedger::steps() const {
  std::int64_t n = 0;
  for (const auto& e : entries_) n += e.kind() == PrivacyEvent::Kind::self_composed ? e.count() : 1;
  return n;
}

std::string PrivacyLedger::separately_sampled() const {
  std::vector<double> rates;
  for (const auto& e : step_events_) {
    if (e.kind() != PrivacyEvent::Kind::poisson_sampled) continue;
    const double q = e.sampling_rate();
    if (std::find(rates.begin(), rates.end(), q) != rates.end()) {
      std::ostringstream s;
      s << "one logical step recorded two PoissonSampled events of sampling rate " << q
        << ": if they are two releases of one Poisson batch, epsilon is under-counted (record them as one "
           "PoissonSampled(q, Composed([...])); a DP-SGD mechanism declares its step's releases with "
           "step_releases)";
      return s.str();
    }
    rates.push_back(q);
  }
  return {};
}

void PrivacyLedger::add_caveat(const std::string& caveat) {
  if (std::find(caveats_.begin(), caveats_.end(), caveat) == caveats_.end()) caveats_.push_back(caveat);
}

}  // namespace privdiff::sdk
