#pragma once
/// @file
/// What a record-replay check found: measured distances against their bounds, and violations
/// (check/record_replay.hpp).

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

/// One measured distance between the releases on D and D ∪ {x}, against the declared bound.
struct Measurement {
  std::string name;
  double distance = 0;  ///< in the units of the bound (e.g. ||Δ released gradient|| times q N)
  double bound = 0;
  double x_norm = std::nan("");  ///< x's own gradient norm before clipping, where the engine shows it
};

struct Report {
  std::vector<std::string> violations;  ///< empty: every check held
  std::vector<Measurement> measurements;
  /// The largest relative change of a record of D's gradient norm between the runs on D and on
  /// D ∪ {x} (0: the replay isolated x exactly).
  double fidelity = 0;

  void add(const std::string& finding) {
    if (!finding.empty()) violations.push_back(finding);
  }
  void merge(const Report& other) {
    violations.insert(violations.end(), other.violations.begin(), other.violations.end());
    measurements.insert(measurements.end(), other.measurements.begin(), other.measurements.end());
    fidelity = std::max(fidelity, other.fidelity);
  }
  /// The largest distance / bound over the measurements with a positive bound.
  double worst_ratio() const {
    double worst = 0;
    for (const auto& m : measurements) {
      if (m.bound > 0) worst = std::max(worst, m.distance / m.bound);
    }
    return worst;
  }
  std::string describe() const {
    std::ostringstream out;
    for (const auto& m : measurements) {
      char line[256];
      std::snprintf(line, sizeof line, "  %-64s %.9g / %.9g", m.name.c_str(), m.distance, m.bound);
      out << line;
      if (!std::isnan(m.x_norm)) out << "   (x's norm: " << m.x_norm << ")";
      out << "\n";
    }
    if (fidelity > 0) out << "  replay fidelity: D's records' norms moved by at most " << fidelity << " (relative)\n";
    for (const auto& v : violations) out << "  VIOLATION: " << v << "\n";
    return out.str();
  }
};

/// `scale` * ||with - without||_2 over every released tensor, against `bound` (with a relative and
/// an absolute slack for rounding). Differing counts, shapes or dtypes, and values that are not
/// finite, are findings of their own.
inline Measurement distance_between(const std::string& what, const std::vector<at::Tensor>& without,
                                    const std::vector<at::Tensor>& with, double scale, double bound,
                                    double relative_slack, double absolute_slack, Report& report,
                                    double x_norm = std::nan("")) {
  Measurement m{what, std::nan(""), bound, x_norm};
  if (without.size() != with.size()) {
    report.add(what + ": " + std::to_string(without.size()) + " tensors released on D, " +
               std::to_string(with.size()) + " on D + x");
    return m;
  }
  double squares = 0;
  for (std::size_t j = 0; j < without.size(); ++j) {
    if (without[j].sizes() != with[j].sizes() || without[j].scalar_type() != with[j].scalar_type()) {
      std::ostringstream s;
      s << what << ": released tensor " << j << " is " << without[j].sizes() << " " << without[j].scalar_type()
        << " on D but " << with[j].sizes() << " " << with[j].scalar_type() << " on D + x";
      report.add(s.str());
      return m;
    }
    const at::Tensor a = without[j].to(at::kDouble), b = with[j].to(at::kDouble);
    if (!at::isfinite(a).all().item<bool>() || !at::isfinite(b).all().item<bool>()) {
      report.add(what + ": released tensor " + std::to_string(j) + " is not finite");
      return m;
    }
    squares += (b - a).pow(2).sum().item<double>();
  }
  m.distance = scale * std::sqrt(squares);
  report.measurements.push_back(m);
  if (!(m.distance <= bound * (1 + relative_slack) + absolute_slack)) {
    char text[160];
    std::snprintf(text, sizeof text, ": the releases on D and D + x differ by %.9g, more than the declared sensitivity %.9g",
                  m.distance, bound);
    report.add(what + text);
  }
  return m;
}

/// The first place where two ordered logs differ ("" when equal).
inline std::string first_difference(const std::string& what, const std::vector<std::string>& a,
                                    const std::vector<std::string>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return what + ", entry " + std::to_string(i) + ": \"" + a[i] + "\" vs \"" + b[i] + "\"";
  }
  if (a.size() != b.size()) {
    return what + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " entries (first extra: \"" +
           (a.size() > n ? a[n] : b[n]) + "\")";
  }
  return "";
}

inline std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes() << " " << t.scalar_type();
  return s.str();
}

}  // namespace privdiff::sdk::check
