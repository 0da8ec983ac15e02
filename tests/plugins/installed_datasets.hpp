#pragma once
// Dataset plugins of this tree opened as a recipe's [data] section opens them, for the dataset
// plugin tests.

#include "data/open_dataset.hpp"
#include "installed_plugins.hpp"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::testing {

/// Installed dataset plugin `id` with `values` (checked, defaults filled) and optional `classes`.
inline std::unique_ptr<sdk::Dataset> open_data(const std::string& id,
                                                            std::map<std::string, sdk::ConfigValue> values,
                                                            std::optional<std::vector<std::int64_t>> classes = std::nullopt) {
  auto found = installed_plugins().find(sdk::ComponentKind::dataset, id);
  if (!found) throw std::runtime_error("dataset plugin '" + id + "' is not built");
  core::DataSection section{"data", "data",
                            core::ComponentSection{id, sdk::make_config(found->registration->schema, "data", values)},
                            classes};
  return core::open_dataset(section, installed_plugins());
}

inline sdk::ConfigValue text(const std::string& s) { return sdk::ConfigValue{s}; }
inline sdk::ConfigValue integer(std::int64_t v) { return sdk::ConfigValue{v}; }

/// An empty folder of this process for `name` (made afresh; the test removes it).
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("privdiff_datasets_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace privdiff::testing
