#include "sweep/sweep_account.hpp"

#include "release/sweep_statement.hpp"
#include "selection/sweep_state.hpp"
#include "util/atomic_file.hpp"
#include "util/usage_error.hpp"

namespace privdiff::core {

nlohmann::json account_sweep_directory(const std::filesystem::path& dir) {
  SweepState s;
  nlohmann::json caveats = nlohmann::json::array();
  try {
    s = read_sweep_state(dir);
    if (std::filesystem::is_regular_file(dir / "privacy.json")) {
      caveats = nlohmann::json::parse(read_file(dir / "privacy.json")).value("caveats", nlohmann::json::array());
    }
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  const double epsilon = sdk::selection::selection_epsilon(s.count, s.budget, s.delta, sweep_conversion);
  return {{"sweep", dir.string()},
          {"epsilon", epsilon},
          {"delta", s.delta},
          {"recorded_epsilon", s.epsilon},
          {"target_epsilon", s.target_epsilon},
          {"candidates", describe_count(s.count)},
          {"order", s.budget.order},
          {"theorem", release::selection_theorem(s.count)},
          {"released", s.released},
          {"caveats", caveats}};
}

}  // namespace privdiff::core
