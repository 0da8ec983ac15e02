#pragma once
// The head-to-head table of `privdiff compare` (markdown, CSV) and its HTML report with plots drawn
// by gnuplot (SVG) and each run's sample grid.

#include "compare/run_record.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

struct ComparisonTable {
  std::vector<std::string> header;             ///< for people (markdown)
  std::vector<std::vector<std::string>> rows;  ///< one per run, "–" where a run has no value
  std::vector<std::string> csv_header;         ///< plain ASCII names (epsilon_rdp, frechet_distance, ...)
  std::vector<std::vector<std::string>> csv_rows;  ///< numbers at full (round-trip) precision, "" for none
  /// Per column, for the HTML report's transposed table (runs as columns, these as rows): the
  /// section it is listed under ("training", "privacy", "evaluation", then one per evaluator id;
  /// "" for the run column, which is the table's header) and its name there (a metric without its
  /// evaluator, which names the section).
  std::vector<std::string> group;
  std::vector<std::string> name_in_group;
};

/// A line of a plot: (x, y) points with a legend label.
struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
  int color = 0;  ///< gnuplot line colour index (1, 2, ...; 0: by position), e.g. one per run
  int dash = 1;   ///< gnuplot dash type (1 solid, 2 dashed, ...), e.g. one per accountant
};

/// Columns: run, mechanism, K, epsilon under every accountant any run reports, the accountant that
/// calibrated the noise, delta, sigma, steps (each stage's, as the recipe counts them), private steps
/// (the privacy ledger's logical steps, which epsilon accounts for: 0 for a run without a private
/// stage), trainable parameters, training time, each evaluation metric (grouped by evaluator) with
/// the sample count, and the number of caveats on the run's guarantee.
ComparisonTable make_comparison_table(const std::vector<RunRecord>& runs, const std::vector<std::string>& labels);

std::string to_markdown(const ComparisonTable& table);
std::string to_csv(const ComparisonTable& table);

/// Thrown by plot_svg when gnuplot is not installed (the message says what to install).
class GnuplotMissing : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Draws the series as an SVG line plot with gnuplot (its script and data stay beside the SVG).
/// Throws GnuplotMissing without gnuplot, std::runtime_error when it fails.
void plot_svg(const std::filesystem::path& svg, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::vector<PlotSeries>& series, bool log_y = false);

struct ReportInputs {
  std::string command;                          ///< how the report was made
  std::vector<RunRecord> runs;
  std::vector<std::string> labels;              ///< unique display names, one per run
  ComparisonTable table;
  std::vector<std::filesystem::path> plots;     ///< relative to the report
  std::vector<std::string> plot_notes;          ///< what the plots leave out, and why
  std::vector<std::filesystem::path> grids;     ///< relative to the report; empty path = none
};

/// Self-contained report.html beside its plots/ and grids/ folders.
std::string render_html_report(const ReportInputs& inputs);

}  // namespace privdiff::core
