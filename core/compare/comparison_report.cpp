#include "compare/comparison_report.hpp"

#include "util/atomic_file.hpp"
#include "util/markup_escape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <tuple>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

const std::string none = "–";

std::string number(double v, int precision = 4) {
  std::ostringstream os;
  os << std::setprecision(precision) << v;
  return os.str();
}

std::string join_stage_values(const nlohmann::json& stages, const char* key, bool private_only, int precision = 5) {
  std::string out;
  for (const auto& s : stages) {
    if (private_only && !s.value("private", false)) continue;
    if (!s.contains(key)) continue;
    if (!out.empty()) out += " / ";
    const auto& v = s[key];
    out += v.is_string() ? v.get<std::string>() : v.is_number_float() ? number(v.get<double>(), precision) : v.dump();
  }
  return out.empty() ? none : out;
}

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

/// Every (evaluator, metric) pair any run reports, in the order they first appear, each evaluator's
/// metrics together (a metric only a later run has goes after its evaluator's others).
std::vector<std::pair<std::string, std::string>> evaluation_columns(const std::vector<RunRecord>& runs) {
  std::vector<std::pair<std::string, std::string>> columns;
  for (const auto& r : runs) {
    if (!r.eval.is_object()) continue;
    const nlohmann::json evaluators = r.eval.value("evaluators", nlohmann::json::object());
    for (const auto& [id, result] : evaluators.items()) {
      const nlohmann::json metrics = result.value("metrics", nlohmann::json::object());
      for (const auto& [metric, value] : metrics.items()) {
        const std::pair<std::string, std::string> column{id, metric};
        if (std::find(columns.begin(), columns.end(), column) != columns.end()) continue;
        const auto last = std::find_if(columns.rbegin(), columns.rend(), [&](const auto& c) { return c.first == id; });
        columns.insert(last == columns.rend() ? columns.end() : last.base(), column);  // after its evaluator's last
      }
    }
  }
  return columns;
}

/// The value at `path` in `j` (null where a key is missing or a value on the way is no object).
nlohmann::json found(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return nlohmann::json();
    at = &(*at)[key];
  }
  return *at;
}

/// Which sample set the run's eval.json scored: its file, within the run directory when it is there,
/// and the --max-samples it was cut to.
std::string scored_set(const RunRecord& r) {
  const nlohmann::json given = found(r.eval, {"samples"});
  const std::string samples = given.is_string() ? given.get<std::string>() : "";
  if (samples.empty()) return "?";
  std::error_code ec;
  const fs::path relative = fs::relative(samples, r.dir, ec);
  const bool inside = !ec && !relative.empty() && *relative.begin() != "..";
  std::string out = inside ? relative.string() : samples;
  const nlohmann::json cut = found(r.eval, {"settings", "max_samples"});
  if (cut.is_number_integer() && cut.get<std::int64_t>() > 0) out += " (--max-samples " + cut.dump() + ")";
  return out;
}

}  // namespace

ComparisonTable make_comparison_table(const std::vector<RunRecord>& runs, const std::vector<std::string>& labels) {
  std::vector<std::string> accountants;
  for (const auto& r : runs) {
    for (const auto& entry : r.privacy.value("results", nlohmann::json::array())) {
      const std::string id = entry.value("accountant", "");
      if (std::find(accountants.begin(), accountants.end(), id) == accountants.end()) accountants.push_back(id);
    }
  }
  ComparisonTable t;
  // A column: its markdown header, CSV name, and (HTML) section and name there (the header's by default).
  auto column = [&](const std::string& display, const std::string& csv, const std::string& group,
                    const std::string& name = "") {
    t.header.push_back(display);
    t.csv_header.push_back(csv);
    t.group.push_back(group);
    t.name_in_group.push_back(name.empty() ? display : name);
  };
  const char* const training = "training";
  const char* const privacy = "privacy";
  column("run", "run", "");
  column("mechanism", "mechanism", training);
  column("K", "noise_multiplicity", training);
  for (const auto& a : accountants) column("ε (" + a + ")", "epsilon_" + a, privacy);
  column("calibrated by", "calibration_accountant", privacy);
  for (const auto& [display, csv, group] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"δ", "delta", privacy}, {"σ", "noise_multiplier", privacy}, {"steps", "steps", training},
           {"private steps", "private_steps", privacy}, {"trainable params", "trainable_parameters", training},
           {"ex/s (private)", "private_examples_per_second", training}, {"train time (s)", "training_seconds", training},
           {"train CPU-h", "training_cpu_hours", training}}) {
    column(display, csv, group);
  }
  // One column per metric, named with the evaluator that produced it: Inception FID and the feature
  // CNN's Fréchet distance are never under one name.
  const auto metrics = evaluation_columns(runs);
  for (const auto& [id, metric] : metrics) column(metric + " [" + id + "]", id + "." + metric, id, metric);
  column("eval samples", "eval_samples", "evaluation", "samples");
  column("eval set", "eval_set", "evaluation", "sample set");
  column("caveats", "caveats", privacy);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    const auto& stages = r.summary.value("stages", nlohmann::json::array());
    std::vector<std::string> row, csv;
    // A cell: what the table shows, and the CSV's full-precision value ("" where the run has none).
    auto cell = [&](const std::string& display, const std::string& full) {
      row.push_back(display);
      csv.push_back(display == none ? "" : full);
    };
    auto text = [&](const std::string& value) { cell(value, value); };
    auto real = [&](const nlohmann::json& v, int precision = 4) {
      if (v.is_number()) cell(number(v.get<double>(), precision), number(v.get<double>(), 17));
      else cell(none, "");
    };
    text(labels[i]);
    text(join_stage_values(stages, "mechanism", false));
    text(join_stage_values(stages, "noise_multiplicity", false));
    for (const auto& a : accountants) {
      nlohmann::json epsilon;
      for (const auto& entry : r.privacy.value("results", nlohmann::json::array())) {
        if (entry.value("accountant", "") == a && entry.contains("epsilon")) epsilon = entry["epsilon"];
      }
      real(epsilon);
    }
    text(r.summary.value("calibration_accountant", none));
    real(found(r.privacy, {"delta"}));
    cell(join_stage_values(stages, "noise_multiplier", true), join_stage_values(stages, "noise_multiplier", true, 17));
    // Each stage's steps, as mechanism lists the stages (a non-private run trained too); the ledger's
    // logical steps are what epsilon accounts for.
    text(join_stage_values(stages, "steps", false));
    text(std::to_string(r.steps));
    text(r.summary.contains("model") ? r.summary["model"].value("trainable_parameters", nlohmann::json(0)).dump() : none);
    cell(join_stage_values(stages, "examples_per_second", true, 3), join_stage_values(stages, "examples_per_second", true, 17));
    real(found(r.summary, {"training_seconds"}));
    // CPU time over wall time's machine load and threads; absent for runs of privdiff 0.11 and before.
    const nlohmann::json cpu = found(r.summary, {"training_cpu_seconds"});
    real(cpu.is_number() ? nlohmann::json(cpu.get<double>() / 3600.0) : cpu, 3);
    for (const auto& [id, metric] : metrics) real(found(r.eval, {"evaluators", id.c_str(), "metrics", metric.c_str()}));
    const nlohmann::json samples = found(r.eval, {"counts", "samples"});
    text(samples.is_number() ? samples.dump() : none);
    text(r.eval.is_object() ? scored_set(r) : none);
    text(std::to_string(r.privacy.value("caveats", nlohmann::json::array()).size()));
    t.rows.push_back(std::move(row));
    t.csv_rows.push_back(std::move(csv));
  }
  return t;
}

std::string to_markdown(const ComparisonTable& t) {
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells) {
    os << "|";
    for (const auto& c : cells) os << " " << c << " |";
    os << "\n";
  };
  line(t.header);
  os << "|";
  for (std::size_t i = 0; i < t.header.size(); ++i) os << "---|";
  os << "\n";
  for (const auto& row : t.rows) line(row);
  return os.str();
}

std::string to_csv(const ComparisonTable& t) {
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) os << (i ? "," : "") << csv_field(cells[i]);
    os << "\n";
  };
  line(t.csv_header);
  for (const auto& row : t.csv_rows) line(row);
  return os.str();
}

void plot_svg(const fs::path& svg, const std::string& title, const std::string& xlabel, const std::string& ylabel,
              const std::vector<PlotSeries>& series, bool log_y) {
  const fs::path base = svg.parent_path() / svg.stem();
  std::ostringstream script;
  // noenhanced: titles are literal text (gnuplot's enhanced mode set "dp_ldm"'s "ldm" as a subscript).
  script << "set terminal svg size 720,420 fixed noenhanced font 'Sans,12' background rgb 'white'\n"
         << "set output " << gnuplot_quote(fs::absolute(svg).string()) << "\n"
         << "set title " << gnuplot_quote(title) << "\nset xlabel " << gnuplot_quote(xlabel) << "\nset ylabel "
         << gnuplot_quote(ylabel) << "\nset key outside right top\nset grid\n";
  if (log_y) script << "set logscale y\n";
  script << "plot ";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const fs::path data = base.string() + "-" + std::to_string(i) + ".dat";
    std::ostringstream rows;
    rows << std::setprecision(10);
    for (const auto& [x, y] : series[i].points) rows << x << " " << y << "\n";
    write_file_atomically(data, rows.str());
    const int color = series[i].color > 0 ? series[i].color : static_cast<int>(i) + 1;
    script << (i ? ", " : "") << gnuplot_quote(fs::absolute(data).string()) << " using 1:2 with lines lw 2 lc "
           << color << " dt " << std::max(1, series[i].dash) << " title " << gnuplot_quote(series[i].label);
  }
  script << "\n";
  const fs::path gp = base.string() + ".gp";
  write_file_atomically(gp, script.str());
  const std::string command = "gnuplot '" + fs::absolute(gp).string() + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start gnuplot");
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = ::pclose(pipe);
  if (status != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      throw GnuplotMissing("privdiff compare draws its plots with gnuplot, which is not installed "
                           "(apt-get install gnuplot-nox; scripts/install_dependencies.sh does)");
    }
    throw std::runtime_error("gnuplot failed on " + gp.string() + ": " + output);
  }
}

namespace {
// {"samples": 500, "real_test": 10000} -> "500 samples, 10,000 real test": for people, not JSON.
std::string counts_text(const nlohmann::json& counts) {
  std::string out;
  for (const auto& [key, value] : counts.items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', ' ');
    std::string n = value.is_number_integer() ? std::to_string(value.get<std::int64_t>()) : value.dump();
    for (int at = static_cast<int>(n.size()) - 3; at > 0 && n[0] != '-'; at -= 3) n.insert(static_cast<std::size_t>(at), ",");
    out += (out.empty() ? "" : ", ") + n + " " + name;
  }
  return out.empty() ? "no counts" : out;
}

/// Escaped, with a line-break opportunity after "_", "." and "/": names wrap there (and at spaces and
/// hyphens), never inside a word.
std::string html_breakable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    out += html_escape(std::string(1, c));
    if (c == '_' || c == '.' || c == '/') out += "<wbr>";
  }
  return out;
}

/// The table transposed: one column per run (a run's values read down), one row per quantity, the
/// rows in sections (training, privacy, evaluation, then one per evaluator, its metrics together).
/// Five runs with two evaluators' metrics fit 1,200 px; with many runs the table scrolls in its box.
std::string html_table(const ComparisonTable& t) {
  std::vector<std::string> groups;
  for (const char* known : {"training", "privacy", "evaluation"}) {
    if (std::find(t.group.begin(), t.group.end(), known) != t.group.end()) groups.emplace_back(known);
  }
  for (const auto& g : t.group) {
    if (!g.empty() && std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  std::ostringstream h;
  h << "<div class=\"table-box\"><table id=\"comparison\"><thead><tr><th class=\"corner\">run</th>";
  for (const auto& row : t.rows) h << "<th scope=\"col\">" << html_breakable(row.at(0)) << "</th>";  // the run
  h << "</tr></thead><tbody>\n";
  for (const auto& g : groups) {
    const bool evaluator = g != "training" && g != "privacy" && g != "evaluation";
    h << "<tr class=\"group\"><th scope=\"rowgroup\" colspan=\"" << t.rows.size() + 1 << "\">"
      << (evaluator ? "evaluator <code>" + html_escape(g) + "</code>" : html_escape(g)) << "</th></tr>\n";
    for (std::size_t c = 0; c < t.group.size(); ++c) {
      if (t.group[c] != g) continue;  // (the run column's group is "": it heads the table)
      h << "<tr><th scope=\"row\">" << html_breakable(t.name_in_group[c]) << "</th>";
      for (const auto& row : t.rows) {
        const std::string& v = row.at(c);
        char* end = nullptr;
        const bool numeric = !v.empty() && (std::strtod(v.c_str(), &end), *end == '\0');  // "1e-05" never wraps
        h << (numeric ? "<td class=\"num\">" : "<td>") << html_escape(v) << "</td>";
      }
      h << "</tr>\n";
    }
  }
  h << "</tbody></table></div>\n";
  return h.str();
}
}  // namespace

std::string render_html_report(const ReportInputs& in) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>privdiff comparison</title>\n"
    // The table fits the page (runs as columns, run names wrapping at word ends, never inside a word);
    // long paths in the notes may break anywhere.
    << "<style>body{font-family:sans-serif;margin:2em;max-width:1400px}.table-box{overflow-x:auto}"
       "table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #bbb;padding:3px 6px;text-align:right}"
       "thead th{background:#eee;font-weight:600;text-align:center;vertical-align:bottom;overflow-wrap:break-word}"
       "tbody th{text-align:left;font-weight:normal;background:#f8f8f8}td.num{white-space:nowrap}tr.group th{background:#e3e8f0;"
       "font-weight:600;padding-top:5px}.note{color:#444;font-size:13px;overflow-wrap:anywhere}"
       "figure{display:inline-block;margin:1em;vertical-align:top}img.plot{max-width:100%}"
       "img.grid{image-rendering:pixelated;width:300px}</style></head><body>\n"
    << "<h1>privdiff comparison</h1>\n<p class=\"note\">Made with <code>" << html_escape(in.command) << "</code></p>\n"
    << "<h2>Runs</h2>\n" << html_table(in.table)
    << "<p class=\"note\">ε: the privacy spent by each run's ledger under each accountant (upper bounds; "
       "the target was checked with the run's own accountant). Steps: each stage's training steps, in the order "
       "of the mechanisms; private steps: the logical steps in the privacy ledger, which ε accounts for (0 for a "
       "run without a private stage). Metrics are listed under the evaluator that produced them; only the "
       "inception evaluator's FID and IS are comparable with published numbers. What each "
       "evaluator measured with, and the sample counts:</p><ul class=\"note\">";
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    const auto& e = in.runs[i].eval;
    h << "<li>" << html_escape(in.labels[i]) << " (" << html_escape(in.runs[i].dir.string()) << "): ";
    if (e.is_null()) {
      h << "not evaluated";
    } else {
      h << html_escape(counts_text(e.value("counts", nlohmann::json::object()))) << "<ul>";
      const nlohmann::json evaluators = e.value("evaluators", nlohmann::json::object());
      for (const auto& [id, result] : evaluators.items()) {
        h << "<li>" << html_escape(id) << ": " << html_escape(result.value("provenance", std::string("?"))) << "</li>";
      }
      h << "</ul>";
    }
    h << "</li>\n";
  }
  h << "</ul>\n<h2>Privacy and training</h2>\n";
  for (const auto& p : in.plots) {
    h << "<figure><img class=\"plot\" src=\"" << html_escape(p.string()) << "\" alt=\"" << html_escape(p.stem().string())
      << "\"></figure>\n";
  }
  if (!in.plot_notes.empty()) {
    h << "<ul class=\"note\" id=\"plot-notes\">";
    for (const auto& note : in.plot_notes) h << "<li>" << html_escape(note) << "</li>";
    h << "</ul>\n";
  }
  h << "<h2>Samples</h2>\n";
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    h << "<figure><figcaption>" << html_escape(in.labels[i]) << "</figcaption>";
    if (in.grids[i].empty()) {
      h << "<p>(no samples.png)</p>";
    } else {
      h << "<img class=\"grid\" src=\"" << html_escape(in.grids[i].string()) << "\" alt=\"samples of "
        << html_escape(in.labels[i]) << "\">";
    }
    h << "</figure>\n";
  }
  // For headless checks (scripts/check_report_renders.sh): how many images actually loaded, and how
  // far the page is wider than the window, or the table than its box (a horizontal scroll bar).
  h << "<script>window.addEventListener('load',function(){var all=document.images,ok=0;for(var i=0;i<all.length;i++)"
       "{if(all[i].complete&&all[i].naturalWidth>0&&all[i].width>0&&all[i].height>0)ok++;}document.body.setAttribute('data-images-loaded',ok+'/'+all.length);"
       "var e=document.documentElement,b=document.querySelector('.table-box');"
       "document.body.setAttribute('data-overflow',Math.max(0,e.scrollWidth-e.clientWidth,b?b.scrollWidth-b.clientWidth:0));"
       "});</script>\n</body></html>\n";
  return h.str();
}

}  // namespace privdiff::core
