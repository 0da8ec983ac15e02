#include "data/protected_data.hpp"

#include "data/dataset_identity.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

fs::path place(const fs::path& run) {  // one name per directory, however it was written
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(run, ec);
  return ec ? run : canonical;
}

}  // namespace

OpenedProtectedData open_protected_data(const std::vector<RecordSet>& sets, const RecordKey& key,
                                        const RunDataOpener& open) {
  std::vector<fs::path> runs;
  for (const auto& set : sets) {
    if (set.is_private && std::find(runs.begin(), runs.end(), place(set.origin)) == runs.end()) {
      runs.push_back(place(set.origin));
    }
  }
  OpenedProtectedData out;
  std::vector<DatasetIdentity> identities;
  std::map<std::string, std::string> unopened;  // run directory -> why
  for (const auto& run : runs) {
    try {
      if (!open) throw std::runtime_error("not opened by this command");
      for (auto& data : open(run)) {
        identities.push_back(dataset_identity(*data));
        out.opened.push_back(std::move(data));
      }
    } catch (const std::exception& e) {
      unopened[run.string()] = e.what();
    }
  }
  for (const auto& set : sets) {
    if (!set.is_private) continue;
    ProtectedData data{"the data run " + set.origin + " trained on privately (" + set.description + ")", set, nullptr, ""};
    for (std::size_t i = 0; i < identities.size() && !data.images; ++i) {
      if (overlap(identities[i], set, key).records > 0) data.images = out.opened[i].get();
    }
    if (!data.images) {
      const auto why = unopened.find(place(set.origin).string());
      data.unopened = why != unopened.end() ? "its data cannot be opened: " + why->second
                                             : "its recipe's data no longer hold these records";
    }
    out.data.push_back(std::move(data));
  }
  return out;
}

}  // namespace privdiff::core
