#include "selection/sweep_report.hpp"

#include "util/markup_escape.hpp"

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

namespace {

std::string parameters_of(const SweepState& s, const SweepCandidate& c) {
  std::string out;
  for (const auto& spec : s.space) {
    const std::string key = spec.substr(0, spec.find('='));
    const auto it = c.values.find(key);
    out += (out.empty() ? "" : "; ") + key + "=" + (it == c.values.end() ? "" : it->second);
  }
  return out;
}

}  // namespace

std::string sweep_csv_header() {
  return "sweep,candidate,parameters,noise_multiplier,epsilon_alone,score_metric,score,selected\n";
}

std::string sweep_csv_rows(const SweepState& s, const fs::path& dir) {
  std::ostringstream out;
  out << std::setprecision(17);
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const auto& c = s.candidates[i];
    out << csv_field(dir.string()) << "," << i + 1 << "," << csv_field(parameters_of(s, c)) << "," << c.noise_multiplier
        << "," << c.single_run_epsilon << "," << csv_field(s.score) << ",";
    if (c.score) out << *c.score;
    out << "," << (s.selected && *s.selected == i ? 1 : 0) << "\n";
  }
  return out.str();
}

std::string sweep_html(const SweepState& s, const fs::path& dir) {
  std::ostringstream out;
  out << std::setprecision(4) << "<h2>Sweep " << html_escape(dir.string()) << "</h2>\n<p>The whole search: epsilon "
      << s.epsilon << " at delta " << s.delta << " (target " << s.target_epsilon << "), the best of K candidates, K ~ "
      << html_escape(describe_count(s.count)) << ", selected by " << html_escape(s.score) << ".</p>\n"
      << "<p><strong>Private:</strong> the rows below (K, every candidate and its score) are not covered by the "
         "selection theorem; publish only the selected model and privacy.json.</p>\n<table>\n<tr><th>candidate</th>"
         "<th>parameters</th><th>noise multiplier</th><th>epsilon alone</th><th>" << html_escape(s.score)
      << "</th><th></th></tr>\n";
  for (std::size_t i = 0; i < s.candidates.size(); ++i) {
    const auto& c = s.candidates[i];
    out << "<tr><td>" << i + 1 << "</td><td>" << html_escape(parameters_of(s, c)) << "</td><td>" << c.noise_multiplier
        << "</td><td>" << c.single_run_epsilon << "</td><td>";
    if (c.score) out << *c.score;
    else out << (c.done ? "?" : "not run");
    out << "</td><td>" << (s.selected && *s.selected == i ? "<strong>selected</strong>" : "") << "</td></tr>\n";
  }
  out << "</table>\n";
  if (s.candidates.empty()) out << "<p>(no candidate: K = 0 was drawn)</p>\n";
  return out.str();
}

}  // namespace privdiff::core
