#include "release/privacy_statement.hpp"

#include "util/atomic_file.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <algorithm>

namespace privdiff::core::release {

namespace fs = std::filesystem;
using nlohmann::json;

void PrivacyStatement::add_caveat(const std::string& caveat) {
  if (std::find(caveats.begin(), caveats.end(), caveat) == caveats.end()) caveats.push_back(caveat);
}

bool certifies_upper_bound(const sdk::Accountant& accountant, const sdk::EpsilonResult& result) {
  if (!accountant.is_upper_bound()) return false;
  return std::none_of(result.warnings.begin(), result.warnings.end(),
                      [](const std::string& w) { return w.find("not an upper bound") != std::string::npos; });
}

std::string approximation_caveat(const std::string& accountant_id) {
  return "the guarantee's epsilon is by accountant '" + accountant_id + "', an approximation that does not certify an "
         "upper bound ([privacy] allow_approximate_accountant = true): the true epsilon may be larger";
}

namespace {

// One accountant's entry of privacy.json; `upper_bound` false when its figure is an approximation.
json figure(const std::string& id, const sdk::Accountant& accountant, const sdk::PrivacyEvent& spent, double delta,
            bool& upper_bound) {
  json entry = {{"accountant", id}};
  upper_bound = true;
  if (auto why = accountant.cannot_evaluate(spent); !why.empty()) {
    entry["error"] = why;
    return entry;
  }
  const sdk::EpsilonResult r = accountant.epsilon(spent, delta);
  entry["epsilon"] = r.epsilon;
  for (const auto& [k, v] : r.details) entry[k] = v;
  if (!r.warnings.empty()) entry["warnings"] = r.warnings;
  upper_bound = certifies_upper_bound(accountant, r);
  if (!upper_bound) entry["upper_bound"] = false;
  return entry;
}

}  // namespace

PrivacyStatement run_statement(const sdk::PrivacyLedger& ledger, const NamedAccountants& accountants, double delta,
                               bool approximation_allowed) {
  PrivacyStatement st;
  st.delta = delta;
  for (const auto& caveat : ledger.caveats()) st.add_caveat(caveat);
  const sdk::PrivacyEvent spent = ledger.total();
  for (std::size_t i = 0; i < accountants.size(); ++i) {
    const auto& [id, accountant] = accountants[i];
    bool upper_bound = true;
    json entry = figure(id, *accountant, spent, delta, upper_bound);
    if (i == 0 && entry.contains("epsilon")) {
      if (!upper_bound && !approximation_allowed) {
        throw ReleaseRefused("privacy.accountant: '" + id + "' does not certify an upper bound on epsilon (it is an "
                             "approximation): the guarantee must be one; use an accountant that is (rdp, prv, "
                             "analytic_gaussian), or set [privacy] allow_approximate_accountant = true, and every "
                             "report then carries a caveat");
      }
      if (!upper_bound) st.add_caveat(approximation_caveat(id));
      st.is_private = !ledger.entries().empty();
      st.epsilon = entry["epsilon"].get<double>();
      st.accountant = id;
    }
    st.results.push_back(entry);
  }
  return st;
}

std::string privacy_unit(const std::string& data_name, bool captioned) {
  return "one record of " + data_name + ": an image with its label" +
         (captioned ? " and its caption (the caption is as private as the image: adding or removing a record adds "
                      "or removes both)"
                    : "");
}

json run_privacy_json(const PrivacyStatement& st, const sdk::PrivacyLedger& ledger) {
  json report = {{"ledger", json::parse(sdk::to_json(ledger))}, {"caveats", st.caveats}};
  if (!st.privacy_unit.empty()) report["privacy_unit"] = st.privacy_unit;
  if (st.delta > 0) report["delta"] = st.delta, report["results"] = st.results;  // a recipe without delta has none
  if (!st.accountant.empty()) report["accountant"] = st.accountant, report["epsilon"] = st.epsilon;
  return report;
}

void write_privacy_json(const fs::path& dir, const json& report) {
  write_file_atomically(dir / "privacy.json", report.dump(2) + "\n");
}

void add_caveat_to_reports(const fs::path& dir, const std::string& caveat) {
  for (const char* name : {"privacy.json", "summary.json"}) {
    const fs::path file = dir / name;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) continue;
    json report;
    try {
      report = json::parse(read_file(file));
    } catch (const std::exception& e) {
      throw std::runtime_error(file.string() + ": unreadable (" + e.what() + "); cannot add the caveat: " + caveat);
    }
    auto& caveats = report["caveats"];
    if (!caveats.is_array()) caveats = json::array();
    if (std::find(caveats.begin(), caveats.end(), caveat) == caveats.end()) caveats.push_back(caveat);
    write_file_atomically(file, report.dump(2) + "\n");
  }
}

}  // namespace privdiff::core::release
