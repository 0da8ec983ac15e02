#include "selection/sweep_state.hpp"

#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/content_hash.hpp>
#include <privdiff/io/json_error.hpp>

#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;
using nlohmann::json;
using sdk::selection::CandidateCount;

namespace {

const char* kind_name(CandidateCount::Kind k) {
  switch (k) {
    case CandidateCount::Kind::truncated_negative_binomial: return "truncated_negative_binomial";
    case CandidateCount::Kind::poisson: return "poisson";
    case CandidateCount::Kind::fixed: return "fixed";
  }
  return "?";
}

}  // namespace

std::string describe_count(const CandidateCount& c) {
  std::ostringstream out;
  out << std::setprecision(6) << kind_name(c.kind) << " (";
  if (c.kind == CandidateCount::Kind::truncated_negative_binomial) out << "eta " << c.eta << ", gamma " << c.gamma;
  if (c.kind == CandidateCount::Kind::poisson) out << "mu " << c.mu;
  if (c.kind == CandidateCount::Kind::fixed) out << "K " << c.count;
  out << "; E[K] " << sdk::selection::expected_count(c) << ")";
  return out.str();
}

json to_json(const sdk::selection::CandidateBudget& b) {
  return {{"order", b.order}, {"rdp", b.rdp}, {"order_hat", b.order_hat}, {"rdp_hat", b.rdp_hat}, {"delta_hat", b.delta_hat}};
}

json to_json(const SweepState& s) {
  json candidates = json::array();
  for (const auto& c : s.candidates) {
    candidates.push_back({{"values", c.values}, {"noise_multiplier", c.noise_multiplier},
                          {"single_run_epsilon", c.single_run_epsilon}, {"done", c.done},
                          {"score", c.score ? json(*c.score) : json(nullptr)}});
  }
  return {{"format", "privdiff-sweep-1"},
          {"note", "private: K and the candidates' scores are not covered by the selection theorem; do not publish"},
          {"recipe", s.recipe.string()}, {"recipe_sha256", s.recipe_sha256}, {"libraries", to_json(s.libraries)}, {"overrides", s.overrides}, {"space", s.space}, {"score", s.score},
          {"maximize", s.maximize}, {"seed", s.seed ? json(*s.seed) : json(nullptr)},
          {"count", {{"kind", kind_name(s.count.kind)}, {"eta", s.count.eta}, {"gamma", s.count.gamma}, {"mu", s.count.mu},
                     {"K", s.count.count}}},
          {"target_epsilon", s.target_epsilon}, {"delta", s.delta}, {"noise_key", s.noise_key},
          {"budget", to_json(s.budget)},
          {"epsilon", s.epsilon}, {"candidates", candidates},
          {"selected", s.selected ? json(*s.selected) : json(nullptr)}, {"released", s.released}};
}

SweepState sweep_state_from_json(const json& j, const fs::path& file) {
  try {
    if (j.at("format") != "privdiff-sweep-1") throw std::runtime_error("unknown format " + j.at("format").dump());
    SweepState s;
    s.recipe = j.at("recipe").get<std::string>();
    s.recipe_sha256 = j.value("recipe_sha256", "");
    if (j.contains("libraries")) s.libraries = component_libraries_from_json(j.at("libraries"));
    s.overrides = j.at("overrides").get<std::vector<std::string>>();
    s.space = j.at("space").get<std::vector<std::string>>();
    s.score = j.at("score");
    s.maximize = j.at("maximize");
    if (!j.at("seed").is_null()) s.seed = j.at("seed").get<std::uint64_t>();
    const json& c = j.at("count");
    s.count.kind = sdk::selection::count_kind(c.at("kind"));
    s.count.eta = c.at("eta"), s.count.gamma = c.at("gamma"), s.count.mu = c.at("mu"), s.count.count = c.at("K");
    s.target_epsilon = j.at("target_epsilon");
    s.delta = j.at("delta");
    s.noise_key = j.at("noise_key");
    const json& b = j.at("budget");
    s.budget = {b.at("order"), b.at("rdp"), b.at("order_hat"), b.at("rdp_hat"), b.at("delta_hat")};
    s.epsilon = j.at("epsilon");
    for (const auto& cj : j.at("candidates")) {
      SweepCandidate candidate;
      candidate.values = cj.at("values").get<std::map<std::string, std::string>>();
      candidate.noise_multiplier = cj.at("noise_multiplier");
      candidate.single_run_epsilon = cj.at("single_run_epsilon");
      candidate.done = cj.at("done");
      if (!cj.at("score").is_null()) candidate.score = cj.at("score").get<double>();
      s.candidates.push_back(std::move(candidate));
    }
    if (!j.at("selected").is_null()) s.selected = j.at("selected").get<std::size_t>();
    s.released = j.at("released");
    return s;
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + " is not a privdiff sweep's state (" + e.what() + ")");
  }
}

SweepState read_sweep_state(const fs::path& dir) {
  const fs::path file = dir / "sweep.json";
  json j;
  try {
    j = json::parse(sdk::read_file(file));
  } catch (const json::exception& e) {
    throw std::runtime_error(file.string() + " is damaged (" + privdiff::sdk::json_error_text(e) + ")");
  }
  return sweep_state_from_json(j, file);
}

void write_sweep_state(const fs::path& dir, const SweepState& s) {
  sdk::write_file_atomically(dir / "sweep.json", to_json(s).dump(2) + "\n");
  std::error_code ec;
  fs::permissions(dir / "sweep.json", fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
}

std::string recipe_file_sha256(const fs::path& recipe) {
  try {
    return sdk::sha256_hex(sdk::read_file(recipe));
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot read the sweep's recipe " + recipe.string() + " (" + e.what() + ")");
  }
}

void check_recipe_unchanged(const SweepState& s) {
  if (s.recipe_sha256.empty()) return;  // planned by an older privdiff: the release gate's ledger checks remain
  if (recipe_file_sha256(s.recipe) == s.recipe_sha256) return;
  throw std::runtime_error(s.recipe.string() + " changed since the sweep was planned: its candidates' noise was "
                           "calibrated for the recipe as it was, and a candidate run from the new one may spend more "
                           "than the sweep's budget. Restore the recipe as it was (sha256 " + s.recipe_sha256 +
                           "), or start a new sweep (what the finished candidates spent stays spent; keep this "
                           "directory private)");
}

}  // namespace privdiff::core
