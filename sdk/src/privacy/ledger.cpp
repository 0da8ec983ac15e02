#include <privdiff/privacy/ledger.hpp>

#include <algorithm>
#include <stdexcept>

namespace privdiff::sdk {

void PrivacyLedger::record(const PrivacyEvent& event, std::int64_t times) {
  if (times < 1) throw std::invalid_argument("PrivacyLedger::record: times must be >= 1");
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

void PrivacyLedger::add_caveat(const std::string& caveat) {
  if (std::find(caveats_.begin(), caveats_.end(), caveat) == caveats_.end()) caveats_.push_back(caveat);
}

}  // namespace privdiff::sdk
