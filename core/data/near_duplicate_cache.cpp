#include "data/near_duplicate_cache.hpp"

#include "data/dataset_identity.hpp"
#include "data/record_key.hpp"
#include "data/siphash.hpp"
#include "util/atomic_file.hpp"
#include "util/cache_directory.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <string>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// Bump when the check's answer for the same data can change (near_duplicates.cpp, image_*.cpp).
constexpr const char* check_version = "near-duplicates v1";

std::optional<fs::path> answer_file(const sdk::Dataset& a, const sdk::Dataset& b, double threshold) {
  const RecordKey* key = nullptr;
  try {
    key = &record_key();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  char threshold_text[32];
  std::snprintf(threshold_text, sizeof threshold_text, "%.17g", threshold);
  const std::string what = std::string(check_version) + "|" + std::to_string(dataset_identity(a).ordered_digest) + "|" +
                           std::to_string(dataset_identity(b).ordered_digest) + "|" + threshold_text;
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.json",
                static_cast<unsigned long long>(siphash24(key->key, what.data(), what.size())));
  return cache_directory() / "near-duplicates" / name;
}

nlohmann::json answers_to_json(const std::vector<NearDuplicate>& found) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : found) {
    out.push_back({d.first, d.second, d.correlation, d.mirrored, d.rotation, d.scale, d.shift_x, d.shift_y});
  }
  return out;
}

std::vector<NearDuplicate> answers_from_json(const nlohmann::json& j) {
  std::vector<NearDuplicate> out;
  for (const auto& row : j) {
    NearDuplicate d;
    d.first = row.at(0), d.second = row.at(1), d.correlation = row.at(2), d.mirrored = row.at(3);
    d.rotation = row.at(4), d.scale = row.at(5), d.shift_x = row.at(6), d.shift_y = row.at(7);
    out.push_back(d);
  }
  return out;
}

void remember(const fs::path& file, const std::vector<NearDuplicate>& found) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  fs::permissions(file.parent_path(), fs::perms::owner_all, fs::perm_options::replace, ec);
  try {
    write_file_atomically(file, answers_to_json(found).dump());
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
  } catch (const std::exception&) {  // a cache that cannot be written costs time, not the answer
  }
}

}  // namespace

std::vector<NearDuplicate> remembered_near_duplicates(const sdk::Dataset& a, const sdk::Dataset& b, double threshold,
                                                      std::ostream* log) {
  const auto file = answer_file(a, b, threshold);
  std::error_code ec;
  if (file && fs::is_regular_file(*file, ec)) {
    try {
      return answers_from_json(nlohmann::json::parse(read_file(*file)));
    } catch (const std::exception&) {  // damaged: computed again and rewritten
    }
  }
  const auto found = find_near_duplicates(a, b, threshold, log);
  if (file) remember(*file, found);
  return found;
}

}  // namespace privdiff::core
