#include "selection/sweep_report.hpp"

#include <iomanip>
#include <sstream>

namespace privdiff::core {

namespace fs = std::filesystem;

bool is_sweep_directory(const fs::path& dir) { return fs::is_regular_file(dir / "sweep.json"); }

std::string sweep_markdown(const SweepState& s, const fs::path& dir) {
  std::ostringstream out;
  out << std::setprecision(4);
  out << "## Sweep " << dir.string() << "\n\n"
      << "The whole search: epsilon " << s.epsilon << " at delta " << s.delta << " (target " << s.target_epsilon
      << "), the best of K candidates, K ~ " << describe_count(s.count) << ", selected by " << s.score
      << (s.maximize ? " (highest)" : " (lowest)") << ".\n\n"
      << "**Private:** the rows below (K, every candidate and its score) are not covered by the selection "
         "theorem; publish only the selected model and privacy.json.\n\n";
  std::string keys;
  for (const auto& spec : s.space) keys += " " + spec.substr(0, spec.find('=')) + " |";
  out << "| candidate |" << keys << " noise multiplier | epsilon alone | " << s.score << " | |\n|---|";
  for (std::size_t k = 0; k < s.space.size(); ++k) out << "---|";
  out << "---|---|---|---|\n";
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const auto& c = s.candidates[i];
    out << "| " << i + 1 << " |";
    for (const auto& spec : s.space) {
      const auto it = c.values.find(spec.substr(0, spec.find('=')));
      out << " " << (it == c.values.end() ? "" : it->second) << " |";
    }
    out << " " << c.noise_multiplier << " | " << c.single_run_epsilon << " | ";
    if (c.score) out << *c.score;
    else out << (c.done ? "?" : "not run");
    out << " | " << (s.selected && *s.selected == i ? "**selected**" : "") << " |\n";
  }
  if (s.candidates.empty()) out << "\n(no candidate: K = 0 was drawn)\n";
  out << "\n";
  return out.str();
}

}  // namespace privdiff::core
