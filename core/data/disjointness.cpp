#include "data/disjointness.hpp"

#include "data/dataset_identity.hpp"
#include "data/near_duplicate_cache.hpp"

#include <set>

namespace privdiff::core {

namespace {

std::string records(std::int64_t n) { return std::to_string(n) + (n == 1 ? " record" : " records"); }

}  // namespace

std::string Disjointness::finding() const {
  if (shared > 0) return "holds " + records(shared) + " of " + shared_with;
  if (!incomparable.empty()) return "cannot be compared with " + incomparable;
  if (!nearest) return {};
  return "holds " + records(near_copies) + (near_copies == 1 ? " that is a near-duplicate" : " that are near-duplicates") +
         " of records of " + nearest_in + " (e.g. its record " + std::to_string(nearest->first) + " and their record " +
         std::to_string(nearest->second) + ": " + nearest->how() + ")";
}

std::string Disjointness::summary() const {
  if (shared > 0) return "holds records of " + shared_with;
  if (!incomparable.empty()) return "cannot be compared with " + incomparable;
  if (nearest) return "holds near-duplicates of records of " + nearest_in;
  return {};
}

std::string Disjointness::checked() const {
  std::string text = "compared by hash with " + records(hashed);
  if (compared > 0) text += " and for " + std::string(near_duplicates_looked_for) + " with " + records(compared);
  for (const auto& data : unopened) text += "; not checked for near-duplicates against " + data;
  return text + "; not looked for: " + near_duplicates_not_looked_for;
}

Disjointness check_disjointness(const sdk::Dataset& candidate, const std::vector<ProtectedData>& private_data,
                                const RecordKey& key, std::ostream* log) {
  Disjointness d;
  d.candidate = candidate.name();
  const DatasetIdentity identity = dataset_identity(candidate);
  for (const auto& data : private_data) {
    const Overlap o = overlap(identity, data.records, key);
    if (!o.known) {
      if (d.incomparable.empty()) {
        d.incomparable = data.description + " (recorded under another record key than " + key.file.string() + ")";
      }
      continue;
    }
    d.hashed += static_cast<std::int64_t>(data.records.hashes.size());
    if (o.records > 0 && d.shared == 0) d.shared = o.records, d.shared_with = data.description;
  }
  if (d.shared > 0 || !d.incomparable.empty()) return d;  // decided: no need to look closer
  std::set<std::int64_t> copies;
  for (const auto& data : private_data) {
    if (!data.images) {
      d.unopened.push_back(data.description + " (" + data.unopened + ")");
      continue;
    }
    for (const auto& pair : remembered_near_duplicates(candidate, *data.images, near_duplicate_threshold, log)) {
      copies.insert(pair.first);
      if (!d.nearest || pair.correlation > d.nearest->correlation) d.nearest = pair, d.nearest_in = data.description;
    }
    d.compared += data.images->size();
  }
  d.near_copies = static_cast<std::int64_t>(copies.size());
  return d;
}

}  // namespace privdiff::core
