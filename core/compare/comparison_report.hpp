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
  std::vector<std::string> header;             ///< for people (markdown, HTML)
  std::vector<std::vector<std::string>> rows;  ///< one per run, "–" where a run has no value
  std::vector<std::string> csv_header;         ///< plain ASCII names (epsilon_rdp, frechet_distance, ...)
  std::vector<std::vector<std::string>> csv_rows;  ///< numbers at full (round-trip) precision, "" for none
};

/// A line of a plot: (x, y) points with a legend label.
struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
  int color = 0;  ///< gnuplot line colour index (1, 2, ...; 0: by position), e.g. one per run
  int dash = 1;   ///< gnuplot dash type (1 solid, 2 dashed, ...), e.g. one per accountant
};

/// Columns: run, mechanism, K, epsilon under every accountant any run reports, the accountant that
/// calibrated the noise, delta, sigma, steps, trainable parameters, training time, each evaluation
/// metric with its sample count, and the number of caveats on the run's guarantee.
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
