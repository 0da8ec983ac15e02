#include <privdiff/components/privacy_event.hpp>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace privdiff::sdk {

PrivacyEvent PrivacyEvent::no_op() { return PrivacyEvent(); }

PrivacyEvent PrivacyEvent::gaussian(double noise_multiplier) {
  if (!std::isfinite(noise_multiplier) || noise_multiplier < 0) {
    throw std::invalid_argument("Gaussian event: noise multiplier must be finite and >= 0, got " +
                                std::to_string(noise_multiplier));
  }
  PrivacyEvent e;
  e.kind_ = Kind::gaussian;
  e.noise_multiplier_ = noise_multiplier;
  return e;
}

PrivacyEvent PrivacyEvent::poisson_sampled(double sampling_rate, PrivacyEvent inner) {
  if (!(sampling_rate >= 0 && sampling_rate <= 1)) {
    throw std::invalid_argument("PoissonSampled event: sampling rate must be in [0, 1], got " +
                                std::to_string(sampling_rate));
  }
  PrivacyEvent e;
  e.kind_ = Kind::poisson_sampled;
  e.sampling_rate_ = sampling_rate;
  e.children_.push_back(std::move(inner));
  return e;
}

PrivacyEvent PrivacyEvent::self_composed(PrivacyEvent inner, std::int64_t count) {
  if (count < 0) {
    throw std::invalid_argument("SelfComposed event: count must be >= 0, got " + std::to_string(count));
  }
  PrivacyEvent e;
  e.kind_ = Kind::self_composed;
  e.count_ = count;
  e.children_.push_back(std::move(inner));
  return e;
}

PrivacyEvent PrivacyEvent::composed(std::vector<PrivacyEvent> events) {
  PrivacyEvent e;
  e.kind_ = Kind::composed;
  e.children_ = std::move(events);
  return e;
}

const PrivacyEvent& PrivacyEvent::inner() const {
  if (kind_ != Kind::poisson_sampled && kind_ != Kind::self_composed) {
    throw std::logic_error("PrivacyEvent::inner() on " + to_string());
  }
  return children_.front();
}

std::string PrivacyEvent::to_string() const {
  std::ostringstream os;
  os.precision(17);
  switch (kind_) {
    case Kind::no_op: os << "NoOp"; break;
    case Kind::gaussian: os << "Gaussian(" << noise_multiplier_ << ")"; break;
    case Kind::poisson_sampled:
      os << "PoissonSampled(" << sampling_rate_ << ", " << inner().to_string() << ")";
      break;
    case Kind::self_composed: os << "SelfComposed(" << inner().to_string() << ", " << count_ << ")"; break;
    case Kind::composed:
      os << "Composed([";
      for (std::size_t i = 0; i < children_.size(); ++i) os << (i ? ", " : "") << children_[i].to_string();
      os << "])";
      break;
  }
  return os.str();
}

bool PrivacyEvent::operator==(const PrivacyEvent& other) const {
  return kind_ == other.kind_ && noise_multiplier_ == other.noise_multiplier_ &&
         sampling_rate_ == other.sampling_rate_ && count_ == other.count_ && children_ == other.children_;
}

}  // namespace privdiff::sdk
