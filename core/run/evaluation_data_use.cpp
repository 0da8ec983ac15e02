#include "run/evaluation_data_use.hpp"

#include "run/init_from.hpp"
#include "run/run_ledger.hpp"
#include "util/atomic_file.hpp"

#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// Near-duplicates only (not copies) are what a standard benchmark's own test split holds of its training
// split (Fashion-MNIST: 1%), so the way forward offered first is the statement that they are other pictures.
std::string refusal(const std::string& split, const std::string& name, const std::string& shares, bool near_only) {
  const std::string what = "the " + split + " split of " + name + " " + shares + ": scores fitted to it are " +
                           (near_only ? "in part " : "") + "noise-free statistics of private records and would be "
                           "published with the run; ";
  if (near_only) {
    return what + "if they are independent pictures (as Fashion-MNIST's test split holds of its training split), "
                  "--allow-near-duplicates says so and the run carries a caveat (see docs/privacy.md#data-identity); "
                  "otherwise score against other data (--real), or allow it with --allow-private-data (with a caveat)";
  }
  return what + "score against data the run did not train on (--reference test, or --real another dataset), or "
                "allow it with --allow-private-data (the run's guarantee then carries a caveat everywhere it is "
                "reported)";
}

}  // namespace

PrivateRecordsGuard::PrivateRecordsGuard(fs::path run_dir, bool allowed, const RecordKey& key,
                                         RunDataOpener open_run_data, std::ostream* log, bool near_duplicates_stated)
    : run_dir_(std::move(run_dir)),
      allowed_(allowed),
      key_(key),
      open_run_data_(std::move(open_run_data)),
      log_(log),
      near_duplicates_stated_(near_duplicates_stated) {
  std::error_code ec;
  const fs::path records = run_dir_ / record_sets_file;
  if (fs::is_regular_file(records, ec)) {
    std::vector<RecordSet> sets;
    try {
      sets = record_sets_from_bytes(read_file(records));
    } catch (const std::exception& e) {
      throw std::runtime_error(records.string() + ": " + e.what());
    }
    private_sets_.emplace();
    for (auto& set : sets) {
      if (set.is_private) private_sets_->push_back(std::move(set));
    }
    return;
  }
  // No records kept: a run that spent no privacy protects nothing; one that did, cannot be compared.
  if (read_run_ledger(run_dir_).ledger.entries().empty()) {
    private_sets_.emplace();
  } else {
    unknown_why_ = run_dir_.string() + " keeps no " + record_sets_file + " (made by privdiff < 0.8?)";
  }
}

const std::vector<ProtectedData>& PrivateRecordsGuard::protected_data() {
  // The data of every run the private sets came from (this run's and its ancestry's), opened from their
  // recipes and matched to the sets by hash (data/protected_data.hpp).
  if (!protected_) protected_ = open_protected_data(*private_sets_, key_, open_run_data_);
  return protected_->data;
}

void PrivateRecordsGuard::check(const std::string& split, const sdk::Dataset& data) {
  std::string shares, caveat;  // for the refusal (counts, record numbers) and for the written caveat
  bool near_only = false;
  if (!private_sets_) {
    shares = caveat = "cannot be compared with the data the run trained on privately (" + unknown_why_ + ")";
  } else if (!private_sets_->empty()) {
    const Disjointness found = check_disjointness(data, protected_data(), key_, log_);
    shares = found.finding(), caveat = found.summary();
    if (found.disjoint() && !found.unopened.empty()) {
      hashes_only_.push_back(split + " split of " + data.name() + " (" + found.checked() + ")");
    }
    near_only = found.nearest && found.shared == 0;
    if (near_only && near_duplicates_stated_) {  // --allow-near-duplicates
      stated_.push_back(split + " split of " + data.name() + " (" + caveat + ")");
      return;
    }
  }
  if (shares.empty()) return;
  if (!allowed_) throw std::invalid_argument(refusal(split, data.name(), shares, near_only));
  private_splits_.push_back(split + " split of " + data.name() + " (" + caveat + ")");
}

std::string PrivateRecordsGuard::caveat(const std::string& result_file) const {
  std::string text;  // empty unless something was let through on the user's word
  if (!private_splits_.empty()) {
    text = result_file + " (privdiff eval --allow-private-data): scored against";
    for (std::size_t i = 0; i < private_splits_.size(); ++i) text += (i ? "; and the " : " the ") + private_splits_[i];
    text += ": its scores are noise-free statistics of private records, not covered by the guarantee; do not "
            "publish them";
  }
  for (const auto& split : stated_) {
    text += (text.empty() ? "" : "; ") + result_file + " (privdiff eval --allow-near-duplicates): the " + split +
            ": stated to be independent pictures; where they are copies, its scores are statistics of private "
            "records, not covered by the guarantee";
  }
  for (const auto& split : hashes_only_) {
    text += (text.empty() ? result_file + ": the " : "; " + result_file + ": the ") + split +
            ": held out by hash only; where it holds near-copies of private records, its scores are statistics of them";
  }
  return text;
}

}  // namespace privdiff::core
