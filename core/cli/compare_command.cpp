// privdiff compare RUN_DIR... [--out DIR]: one table of finished runs (markdown on stdout, CSV) and
// an HTML report with epsilon-vs-step (one line per run and accountant), the training loss, and
// each run's sample grid.
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "compare/comparison_report.hpp"
#include "recipe/suggest.hpp"
#include "run/run_guarantee.hpp"
#include "selection/sweep_report.hpp"
#include "util/atomic_file.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/config/config.hpp>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

/// Display names: the run's name, made unique with its directory when two runs share one.
std::vector<std::string> unique_labels(const std::vector<RunRecord>& runs) {
  std::map<std::string, int> seen;
  for (const auto& r : runs) ++seen[r.name];
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(seen[r.name] > 1 ? r.name + " (" + r.dir.filename().string() + ")" : r.name);
  return out;
}

std::string file_safe(const std::string& text) {
  std::string out;
  for (const char c : text) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return out;
}

/// A new or empty directory, or with --force an earlier report (whose files are replaced, none
/// left stale); anything else is refused rather than written into.
void prepare_report_directory(const fs::path& out, bool force) {
  std::error_code ec;
  if (!fs::exists(out, ec) || (fs::is_directory(out, ec) && fs::is_empty(out, ec))) return;
  if (!fs::is_directory(out, ec)) throw UsageError("compare --out " + out.string() + ": not a directory");
  // (report.png: the screenshot scripts/check_report_renders.sh leaves beside report.html)
  const std::set<std::string> report_files{"compare.md", "compare.csv", "report.html", "report.png", "plots", "grids"};
  if (!fs::is_regular_file(out / "compare.md", ec)) {
    throw UsageError("compare --out " + out.string() + ": the directory is not empty and holds no earlier report "
                     "(compare.md); choose another --out");
  }
  for (const auto& entry : fs::directory_iterator(out)) {
    if (!report_files.count(entry.path().filename().string())) {
      throw UsageError("compare --out " + out.string() + ": holds " + entry.path().filename().string() +
                       ", which is not part of a report; choose another --out");
    }
  }
  if (!force) {
    throw UsageError("compare --out " + out.string() + " holds an earlier report; add --force to replace it, or "
                     "choose another --out");
  }
  for (const auto& name : report_files) fs::remove_all(out / name);
  std::cerr << "replacing the earlier report in " << out.string() << "\n";
}

// epsilon vs step under every accountant each run reports, re-evaluated from its ledger at
// `points` steps; colour by run, dash type by accountant.
std::vector<PlotSeries> epsilon_curves(const std::vector<RunRecord>& runs, const std::vector<std::string>& labels,
                                       const ComponentRegistry& registry, int points) {
  std::vector<PlotSeries> series;
  std::vector<std::string> accountants;  // in order of appearance: their dash types
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    if (!r.privacy.contains("delta") || r.steps <= 0) continue;
    const double delta = r.privacy["delta"].get<double>();
    for (const auto& entry : r.privacy.value("results", nlohmann::json::array())) {
      const std::string id = entry.value("accountant", "");
      auto found = registry.find(sdk::ComponentKind::accountant, id);
      if (!found) {
        std::cerr << "note: accountant '" << id << "' of " << r.dir.string() << " is not installed; no curve\n";
        continue;
      }
      if (std::find(accountants.begin(), accountants.end(), id) == accountants.end()) accountants.push_back(id);
      const int dash = static_cast<int>(std::find(accountants.begin(), accountants.end(), id) - accountants.begin()) + 1;
      auto accountant = create_component<sdk::Accountant>(
          registry, id, sdk::make_config(found->registration->schema, "accountants." + id));
      PlotSeries s{labels[i] + " (" + id + ")", {}, static_cast<int>(i) + 1, dash};
      for (int p = 1; p <= points; ++p) {
        const std::int64_t step = std::max<std::int64_t>(1, r.steps * p / points);
        if (!s.points.empty() && s.points.back().first == static_cast<double>(step)) continue;
        s.points.emplace_back(step, accountant->epsilon(ledger_prefix(r.ledger, step), delta).epsilon);
      }
      series.push_back(std::move(s));
    }
  }
  return series;
}

// The run's loss curves, one per stage (window means, so that single batches' noise does not hide
// the trend), added to the plot of that stage name; what has none is said in `notes`.
void add_loss_curves(const RunRecord& r, const std::string& label, int color,
                     std::vector<std::pair<std::string, std::vector<PlotSeries>>>& plots, std::vector<std::string>& notes) {
  for (const auto& stage : r.losses) {
    if (stage.points.empty()) {
      notes.push_back("No loss curve for " + label + ", stage '" + stage.stage + "': " + stage.missing + ".");
      continue;
    }
    PlotSeries loss{label, {}, color, 1};
    const std::size_t window = std::max<std::size_t>(1, stage.points.size() / 100);
    for (std::size_t j = 0; j + window <= stage.points.size(); j += window) {
      double sum = 0;
      for (std::size_t k = j; k < j + window; ++k) sum += stage.points[k].second;
      loss.points.emplace_back(static_cast<double>(stage.points[j + window - 1].first), sum / static_cast<double>(window));
    }
    auto it = std::find_if(plots.begin(), plots.end(), [&](const auto& p) { return p.first == stage.stage; });
    if (it == plots.end()) it = plots.insert(plots.end(), {stage.stage, {}});
    it->second.push_back(std::move(loss));
  }
}

// A finished run's record, with its epsilon by the release gate from its ledger (agreed with checkpoint.pt's
// copy, under the recipe the checkpoint was trained under), never privacy.json's. A missing, unfinished or
// inconsistent run is bad input (exit 2).
RunRecord run_record(const std::string& dir, const GlobalOptions& global, ComponentRegistry& registry) {
  try {
    RunRecord r = load_run_record(dir);
    const Recipe recipe = load_recipe((fs::path(dir) / "recipe.toml").string(), {}, global, registry);
    const RunGuarantee guarantee = run_guarantee(dir, fs::path(dir) / "checkpoint.pt", recipe, registry);
    use_guarantee(r, guarantee.statement, guarantee.ledger);
    return r;
  } catch (const RecipeError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("compare: ") + e.what());
  }
}

}  // namespace

CLI::App* add_compare_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("compare", "Compare finished runs (one table, markdown and CSV, and report.html) and sweeps (their candidates)");
  struct Args {
    std::vector<std::string> runs;
    std::string out = "comparison";
    int points = 60;
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("RUN_DIR", args->runs, "run directories (after privdiff run, and privdiff eval for the metrics), or sweep directories "
                  "(privdiff sweep: their candidates and choice, in a section of their own)")
      ->required();
  cmd->add_option("--out", args->out, "report directory (default: comparison): compare.csv, compare.md, report.html");
  cmd->add_flag("--force", args->force, "replace an earlier report in --out");
  cmd->add_option("--points", args->points, "steps at which each epsilon curve is evaluated")->check(CLI::Range(2, 1000));
  cmd->callback([&global, &exit_code, args] {
    // Sweeps get their own section (sweep_report.hpp); the runs, a table together.
    std::string sweeps, sweep_rows, sweep_sections;
    std::vector<std::string> run_dirs;
    for (const auto& dir : args->runs) {
      if (!is_sweep_directory(dir)) {
        run_dirs.push_back(dir);
        continue;
      }
      try {
        const SweepState state = read_sweep_state(dir);
        sweeps += sweep_markdown(state, dir);
        sweep_rows += sweep_csv_rows(state, dir);
        sweep_sections += sweep_html(state, dir);
      } catch (const std::runtime_error& e) {
        throw UsageError(std::string("compare: ") + e.what());
      }
    }
    if (run_dirs.empty()) {  // sweeps alone: their candidates in compare.md, compare.csv and report.html
      const fs::path out(args->out);
      prepare_report_directory(out, args->force);
      fs::create_directories(out);
      std::cout << sweeps;
      write_file_atomically(out / "compare.md", sweeps);
      write_file_atomically(out / "compare.csv", sweep_csv_header() + sweep_rows);
      write_file_atomically(out / "report.html", "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                                 "<title>privdiff comparison</title></head><body>\n" + sweep_sections +
                                                 "</body></html>\n");
      std::cout << "wrote " << (out / "compare.md").string() << ", compare.csv and report.html\n";
      exit_code = exit_ok;
      return;
    }
    ComponentRegistry registry;
    load_plugins_of_runs(registry, global, args->runs);
    std::vector<RunRecord> runs;
    for (const auto& dir : run_dirs) runs.push_back(run_record(dir, global, registry));
    const std::vector<std::string> labels = unique_labels(runs);
    const fs::path out(args->out);
    prepare_report_directory(out, args->force);
    fs::create_directories(out / "plots");
    fs::create_directories(out / "grids");

    ReportInputs report;
    report.command = "privdiff compare";
    for (const auto& r : args->runs) report.command += " " + r;  // the sweeps' section is in compare.md
    report.command += " --out " + args->out;
    report.table = make_comparison_table(runs, labels);
    const std::string markdown = to_markdown(report.table) + (sweeps.empty() ? "" : "\n" + sweeps);
    std::cout << markdown;
    write_file_atomically(out / "compare.md", markdown);
    write_file_atomically(out / "compare.csv", to_csv(report.table));

    const std::vector<PlotSeries> epsilon_series = epsilon_curves(runs, labels, registry, args->points);
    std::vector<std::pair<std::string, std::vector<PlotSeries>>> loss_plots;  // by stage
    for (std::size_t i = 0; i < runs.size(); ++i) {
      add_loss_curves(runs[i], labels[i], static_cast<int>(i) + 1, loss_plots, report.plot_notes);
      const RunRecord& r = runs[i];
      const fs::path grid = r.dir / "samples.png";
      if (fs::is_regular_file(grid)) {
        const fs::path copy = fs::path("grids") / (std::to_string(i) + "-" + file_safe(labels[i]) + ".png");
        fs::copy_file(grid, out / copy, fs::copy_options::overwrite_existing);
        report.grids.push_back(copy);
      } else {
        report.grids.emplace_back();
      }
    }
    // Plots are the one part that needs gnuplot: without it the report has tables and grids, and
    // the plot scripts stay in plots/ to draw later.
    bool can_plot = true;
    auto plot = [&](const char* name, const std::string& title, const std::string& ylabel,
                    const std::vector<PlotSeries>& series) {
      if (series.empty() || !can_plot) return;
      const fs::path svg = fs::path("plots") / (std::string(name) + ".svg");
      try {
        plot_svg(out / svg, title, "logical step", ylabel, series);
        report.plots.push_back(svg);
      } catch (const GnuplotMissing& e) {
        can_plot = false;
        std::cerr << "warning: " << e.what() << "; report.html has no plots (their scripts: "
                  << (out / "plots").string() << "/*.gp)\n";
      }
    };
    plot("epsilon", "privacy spent (colour: run; line style: accountant)", "epsilon", epsilon_series);
    // One loss plot per stage: stages train different objectives on different scales (an
    // autoencoder's ~600 against a denoiser's ~0.3), so they never share an axis.
    for (std::size_t k = 0; k < loss_plots.size(); ++k) {
      plot(("loss-" + std::to_string(k) + "-" + file_safe(loss_plots[k].first)).c_str(),
           "training loss, stage '" + loss_plots[k].first + "' (window means)", "loss", loss_plots[k].second);
    }
    report.runs = std::move(runs);
    report.labels = labels;
    write_file_atomically(out / "report.html", render_html_report(report));
    std::cout << "\nwrote " << (out / "compare.md").string() << ", " << (out / "compare.csv").string() << ", "
              << (out / "report.html").string() << "\n";
    exit_code = exit_ok;
  });
  return cmd;
}

}  // namespace privdiff::core::cli
