#include "run/evaluation_data_use.hpp"

#include "run/init_from.hpp"
#include "run/run_ledger.hpp"
#include "util/atomic_file.hpp"

#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

PrivateRecordsGuard::PrivateRecordsGuard(fs::path run_dir, bool allowed, const RecordKey& key)
    : run_dir_(std::move(run_dir)), allowed_(allowed), key_(key) {
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

void PrivateRecordsGuard::check(const std::string& split, const sdk::Dataset& data) {
  std::string shares;
  if (!private_sets_) {
    shares = "cannot be compared with the data the run trained on privately (" + unknown_why_ + ")";
  } else if (!private_sets_->empty()) {
    const DatasetIdentity identity = dataset_identity(data);
    for (const auto& set : *private_sets_) {
      const Overlap o = overlap(identity, set, key_);
      if (!o.known) {
        shares = "cannot be compared with " + set.description + ", which run " + set.origin + " trained on privately "
                 "(recorded under another record key than " + key_.file.string() + ")";
        break;
      }
      if (o.records > 0) {
        shares = "holds records that run " + set.origin + " trained on privately (" + set.description + ")";
        break;
      }
    }
  }
  if (shares.empty()) return;
  if (!allowed_) {
    throw std::invalid_argument(
        "the " + split + " split of " + data.name() + " " + shares + ": scores fitted to it are noise-free statistics "
        "of private records and would be published with the run; score against data the run did not train on "
        "(--reference test, or --real another dataset), or allow it with --allow-private-data (the run's guarantee "
        "then carries a caveat everywhere it is reported)");
  }
  private_splits_.push_back(split + " split of " + data.name() + " (" + shares + ")");
}

std::string PrivateRecordsGuard::caveat(const std::string& result_file) const {
  if (private_splits_.empty()) return {};
  std::string text = result_file + " (privdiff eval --allow-private-data): scored against";
  for (std::size_t i = 0; i < private_splits_.size(); ++i) text += (i ? "; and the " : " the ") + private_splits_[i];
  return text + ": its scores are noise-free statistics of private records, not covered by the guarantee; do not "
                "publish them";
}

}  // namespace privdiff::core
