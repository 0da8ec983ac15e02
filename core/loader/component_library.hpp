#pragma once
// Which code a run or a sweep runs: for each component it uses, the library that provides it and
// that file's SHA-256. Recorded in a run's checkpoint and summary and in a sweep's plan, so that a
// resume with other code for any component — another library, or the same path rebuilt — is refused:
// the noise was calibrated and the ledger written by the code that ran.

#include "loader/component_registry.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

struct ComponentLibrary {
  std::string kind;     ///< "mechanism", "model", ...
  std::string id;       ///< the component id, e.g. "dpsgd"
  std::string library;  ///< absolute path of the plugin library (the host's name for a built-in component)
  std::string sha256;   ///< of the library file's bytes; empty for a component built into the host
};

/// The library of each of `used` (kind, id), without repeats, in the order given. A component that
/// `registry` does not have is left out (validation has refused it already). Throws
/// std::runtime_error naming a library file that cannot be read.
std::vector<ComponentLibrary> component_libraries(const ComponentRegistry& registry,
                                                  const std::vector<std::pair<sdk::ComponentKind, std::string>>& used);

nlohmann::json to_json(const std::vector<ComponentLibrary>& libraries);
/// Throws std::runtime_error when `j` is not such a list.
std::vector<ComponentLibrary> component_libraries_from_json(const nlohmann::json& j);

/// Empty when `now` runs the code `recorded` ran; else one line naming the first component whose
/// library differs, with the recorded library (path, SHA-256) and the one found now. The same bytes at
/// another path are the same code; a component built into the host is compared by name.
std::string library_difference(const std::vector<ComponentLibrary>& recorded, const std::vector<ComponentLibrary>& now);

}  // namespace privdiff::core
