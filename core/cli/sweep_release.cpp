#include "cli/sweep_release.hpp"

#include "cli/command_setup.hpp"
#include "run/composed_run.hpp"
#include "run/run_checkpoint.hpp"
#include "weights/model_export.hpp"

#include <privdiff/io/atomic_file.hpp>

#include <nlohmann/json.hpp>

#include <sstream>

namespace privdiff::core::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string theorem_of(const sdk::selection::CandidateCount& c) {
  using Kind = sdk::selection::CandidateCount::Kind;
  if (c.kind == Kind::truncated_negative_binomial) return "Papernot & Steinke 2022, Theorem 2 (RDP), converted at its order";
  if (c.kind == Kind::poisson) return "Papernot & Steinke 2022, Theorem 6 (RDP), converted at its order";
  return "composition of the K candidates (a fixed K: no selection theorem applies)";
}

json guarantee(const SweepState& s) {
  json caveats = {"selected by privdiff sweep: the guarantee is the sweep's; K, the other candidates and their scores are not "
                  "released (the theorem does not cover them)"};
  if (s.seed) {
    caveats.push_back("K and the candidates were drawn from --seed " + std::to_string(*s.seed) +
                      ": whoever knows the seed knows K, and the theorem's bound does not hold against them");
  }
  return {{"private", true},
          {"epsilon", s.epsilon},
          {"delta", s.delta},
          {"accountant", "rdp"},
          {"mechanism", "the best of K candidate runs, K ~ " + describe_count(s.count)},
          {"theorem", theorem_of(s.count)},
          {"budget", to_json(s.budget)},
          {"candidate_draws", s.seed ? "seeded (--seed)" : "secure (the OS's randomness, not kept)"},
          {"caveats", caveats}};
}

// The candidate's directory, candidates/N, tells that K > N: the theorem covers the best alone, not its
// place among the K. Released text names the release's own directory instead.
std::string without_candidate_path(std::string text, const fs::path& run_dir, const fs::path& release) {
  const std::string from = run_dir.string(), to = release.string();
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The same for every string in a JSON document, before it is written: in the written text a path with
// a quote, a backslash or a control character is escaped, and a search for it there would miss.
void without_candidate_path(json& value, const fs::path& run_dir, const fs::path& release) {
  if (value.is_string()) {
    value = without_candidate_path(value.get<std::string>(), run_dir, release);
  } else if (value.is_structured()) {
    for (auto& item : value) without_candidate_path(item, run_dir, release);
  }
}

// The selected run's model exported with the sweep's guarantee in place of the run's own.
void export_selected(const SweepState& s, const fs::path& run_dir, const fs::path& out, const fs::path& release,
                     const GlobalOptions& global) {
  const RunFiles files = run_files(run_dir.string(), "sweep");
  ComponentRegistry registry;
  const Recipe recipe = load_recipe(files.recipe.string(), {}, global, registry);
  auto model = create_model(recipe, registry);
  load_model_weights(files.checkpoint, *model);
  ModelExport e = export_run_model(files.run_dir, *model);
  const json g = guarantee(s);
  e.metadata[export_keys::epsilon] = std::to_string(s.epsilon);
  e.metadata[export_keys::delta] = std::to_string(s.delta);
  e.metadata[export_keys::accountant] = "rdp (private selection)";
  e.metadata[export_keys::privacy] = g.dump();  // no ledger: init_from refuses to carry a cost it cannot account
  std::ostringstream card;
  card << "# A model selected by privdiff sweep\n\nIts guarantee is the sweep's: (epsilon, delta) = (" << s.epsilon << ", "
       << s.delta << "), " << g["mechanism"].get<std::string>() << ", by " << g["theorem"].get<std::string>()
       << ". It covers the search: the hyperparameters were chosen by the sweep, in a search space fixed before it "
       << "ran. The run's own figures below do not hold for this release.\n\n";
  e.model_card = without_candidate_path(card.str() + e.model_card, run_dir, release);
  write_model_export(e, out);
}

}  // namespace

double candidate_score(const fs::path& run_dir, const std::string& metric) {
  std::string seen;
  for (int e = 0; fs::is_regular_file(run_dir / ("eval-" + std::to_string(e) + ".json")); ++e) {
    const json result = json::parse(sdk::read_file(run_dir / ("eval-" + std::to_string(e) + ".json")));
    for (const auto& [evaluator, scored] : result.at("evaluators").items()) {
      for (const auto& [name, value] : scored.at("metrics").items()) {
        if (metric == evaluator + "." + name && value.is_number()) return value.get<double>();
        seen += (seen.empty() ? "" : ", ") + evaluator + "." + name;
      }
    }
  }
  throw UsageError("sweep --score " + metric + ": " + run_dir.string() + " has no such [[eval]] metric (it has: " +
                   (seen.empty() ? std::string("no [[eval]] results") : seen) + ")");
}

void release_sweep(SweepState& s, const fs::path& dir, const GlobalOptions& global, std::ostream& log) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const auto& score = s.candidates[i].score;
    if (!score) continue;
    if (!best || (s.maximize ? *score > *s.candidates[*best].score : *score < *s.candidates[*best].score)) best = i;
  }
  s.selected = best;
  json report = guarantee(s);
  if (best) {
    const auto& c = s.candidates[*best];
    const fs::path run_dir = dir / "candidates" / std::to_string(*best);
    const fs::path staging = dir / "selected.partial";
    fs::remove_all(staging);
    export_selected(s, run_dir, staging, dir / "selected", global);
    for (const auto& entry : fs::directory_iterator(run_dir)) {
      const std::string name = entry.path().filename().string();
      if (name == "samples.png") fs::copy_file(entry.path(), staging / name);
      if (name.rfind("eval-", 0) == 0 && entry.path().extension() == ".json") {
        json result = json::parse(sdk::read_file(entry.path()));
        result.erase("samples");  // the eval's images stay with the candidate (deleted)
        without_candidate_path(result, run_dir, dir / "selected");
        sdk::write_file_atomically(staging / name, result.dump(2) + "\n");
      }
    }
    fs::remove_all(dir / "selected");
    fs::rename(staging, dir / "selected");
    report["selected"] = {{"hyperparameters", c.values}, {"noise_multiplier", c.noise_multiplier}, {"score", *c.score},
                          {"score_metric", s.score}, {"single_run_epsilon", c.single_run_epsilon}};
    log << "sweep: selected " << json(c.values).dump() << " (" << s.score << " " << *c.score << ", noise multiplier "
        << c.noise_multiplier << "): " << (dir / "selected").string() << "\n";
  } else {
    log << "sweep: no candidate ran (K = 0 may be drawn under a Poisson count): nothing is released but the guarantee\n";
  }
  sdk::write_file_atomically(dir / "privacy.json", report.dump(2) + "\n");
  s.released = true;
}

}  // namespace privdiff::core::cli
