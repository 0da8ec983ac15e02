#pragma once
// `privdiff account SWEEP_DIR`: a sweep's guarantee recomputed from what sweep.json records (the
// candidates' budget, the count's distribution, delta) by the selection theorem, beside what it recorded,
// with the caveats the release gate put on its release (privacy.json).

#include <nlohmann/json.hpp>

#include <filesystem>

namespace privdiff::core {

/// {"sweep", "epsilon", "delta", "recorded_epsilon", "target_epsilon", "candidates", "order", "theorem",
/// "released", "caveats"}. Throws UsageError when sweep.json or privacy.json cannot be read.
nlohmann::json account_sweep_directory(const std::filesystem::path& dir);

}  // namespace privdiff::core
