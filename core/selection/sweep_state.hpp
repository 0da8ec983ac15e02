#pragma once
// A sweep's state (sweep.json, written atomically before any candidate runs and after each one):
// what it searches, how many candidates it drew and their hyperparameters and noise, the per-
// candidate privacy budget and the sweep's guarantee, the candidates' scores, and what it released.
// Resuming reads it back: nothing is drawn again. It holds K and every candidate's score, which the
// selection theorem does not let the sweep publish: it stays with the person who ran it.

#include "loader/component_library.hpp"

#include <privdiff/privacy/private_selection.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::core {

/// How a sweep converts RDP to (epsilon, delta), and where Theorem 6's delta_hat comes from: the plan and
/// the release gate must use the same (a candidate calibrated to the PRV bound exceeds the RDP one).
inline constexpr auto sweep_conversion = sdk::rdp::Conversion::improved;
inline constexpr auto sweep_delta_hat_source = sdk::selection::DeltaHatSource::rdp_and_prv;

struct SweepCandidate {
  std::map<std::string, std::string> values;  ///< the searched keys' values (--set KEY=VALUE)
  double noise_multiplier = 0;                ///< calibrated to the sweep's per-candidate budget
  double single_run_epsilon = 0;              ///< what this candidate alone would cost (RDP, at the sweep's delta)
  bool done = false;
  std::optional<double> score;
};

struct SweepState {
  std::filesystem::path recipe;                 ///< absolute
  /// SHA-256 of the recipe file's text when the sweep was planned: every candidate must run from the
  /// recipe the budget and the noise were calibrated for (empty in a state of an older privdiff).
  std::string recipe_sha256;
  /// The library (path, SHA-256) of every component the recipe uses, when the sweep was planned: the
  /// candidates' noise was calibrated with that code, and a resume with other code is refused (empty in a
  /// state of an older privdiff).
  std::vector<ComponentLibrary> libraries;
  std::vector<std::string> overrides;           ///< the user's --set, applied to every candidate
  std::vector<std::string> space;               ///< the --param specs
  std::string score;                            ///< the [[eval]] metric that selects
  bool maximize = true;
  /// --seed: K and the draws reproducible (tests). Absent: drawn from the OS CSPRNG and never kept, for the
  /// theorem holds only while K is secret (a published seed publishes K).
  std::optional<std::uint64_t> seed;
  sdk::selection::CandidateCount count;
  double target_epsilon = 0, delta = 0;
  std::string noise_key;                        ///< stage.N.noise_multiplier: the calibrated stage's key
  sdk::selection::CandidateBudget budget;
  double epsilon = 0;                           ///< the sweep's, <= target_epsilon
  std::vector<SweepCandidate> candidates;       ///< K of them
  std::optional<std::size_t> selected;
  bool released = false;
};

nlohmann::json to_json(const SweepState& s);
/// The per-candidate budget as sweep.json and privacy.json record it.
nlohmann::json to_json(const sdk::selection::CandidateBudget& b);
/// Throws std::runtime_error naming `file` when it is not a sweep's state.
SweepState sweep_state_from_json(const nlohmann::json& j, const std::filesystem::path& file);

SweepState read_sweep_state(const std::filesystem::path& dir);
/// Writes DIR/sweep.json, owner-only (0600): it holds K and every score, which are not to be published.
void write_sweep_state(const std::filesystem::path& dir, const SweepState& s);

/// The SHA-256 of `recipe`'s text; throws std::runtime_error naming the file when it cannot be read.
std::string recipe_file_sha256(const std::filesystem::path& recipe);

/// Throws std::runtime_error when the recipe file is no longer the one the sweep was planned with.
void check_recipe_unchanged(const SweepState& s);

/// "truncated_negative_binomial(eta 1, gamma 0.25; E[K] 4)" and the like.
std::string describe_count(const sdk::selection::CandidateCount& c);

}  // namespace privdiff::core
