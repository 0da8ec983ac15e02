#pragma once
// Runs a composed recipe: plans and checks the privacy budget, calibrates an "auto" noise
// multiplier, runs the stages in order, and writes the run directory:
//   recipe.toml    the resolved recipe (every default written out)
//   metrics.jsonl  one line per logical step (epsilon so far; seconds, loss and batch size for
//                  non-private stages, and for private ones only with [run] private_diagnostics)
//   ledger.json    every privacy event spent, and the caveats on the guarantee (written before each
//                  checkpoint and at failures; never shrinks, also across failures and resumes)
//   checkpoint.pt  model, mechanism state, generators and ledger (see run_checkpoint.hpp)
//   samples.png    a class-by-row sample grid of the trained model
//   privacy.json   epsilon under every accountant the recipe names, and the caveats
//   summary.json   what ran: model size, stages (steps, sigma, trainable parameters), wall time,
//                  privacy, the data used (privately, publicly; with init_from's ancestry)
//   init_from.json where the initial model came from and what of its privacy was carried
//   data-records.bin what the run and its init_from ancestry trained on, by content (keyed hashes of
//                  private records, plain digests of public ones; data/record_set.hpp), written
//                  before training

#include "data/disjointness.hpp"
#include "data/prompt_check.hpp"
#include "loader/component_library.hpp"
#include "recipe/recipe.hpp"
#include "run/composed_run.hpp"
#include "run/init_from.hpp"

#include <privdiff/config/config.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <stdexcept>

namespace privdiff::core {

struct RunSession;  // one invocation's state (run_session.hpp)

/// Opens one of the recipe's datasets (open_dataset with the registry, or a test's stand-in).
using DatasetOpener = std::function<std::unique_ptr<sdk::Dataset>(const DataSection& data)>;

struct AccountantResult {
  std::string accountant;
  sdk::EpsilonResult result;
};

struct RunSummary {
  std::filesystem::path run_dir;
  sdk::PrivacyLedger ledger;
  std::vector<AccountantResult> privacy;  ///< empty when the recipe sets no delta
};

struct RunOptions {
  /// Continue the run in run_dir from its checkpoint.pt instead of starting a new one.
  bool resume = false;
  /// Checkpoint and stop after this many logical steps in this session (0 = run to the end).
  std::int64_t stop_after_steps = 0;
  /// Polled after every step; true = checkpoint and stop (e.g. on SIGINT).
  std::function<bool()> stop_requested;
  /// What made the run (see run_provenance), recorded in summary.json; null = not recorded.
  nlohmann::json provenance;
  /// The library of every component the run uses (recipe_component_libraries): recorded in its
  /// checkpoints; a resume with another library for any of them is refused. Empty = not recorded (an
  /// embedding host without plugins) and not checked.
  std::vector<ComponentLibrary> libraries;
  /// The ranks of a multi-process run (null: one process). Every rank trains; rank 0 alone writes
  /// the run directory, logs and samples.
  sdk::Collective* collective = nullptr;
  int local_processes = 1;  ///< ranks on this machine: [run] threads = 0 shares the cores among them
  int local_rank = 0;       ///< this rank's place on the machine: its GPU on CUDA
};

/// Thrown when a run stopped early on request, after writing its checkpoint.
class RunStopped : public std::runtime_error {
 public:
  RunStopped(const std::string& what, std::int64_t steps_done) : std::runtime_error(what), steps_done_(steps_done) {}
  std::int64_t steps_done() const { return steps_done_; }

 private:
  std::int64_t steps_done_;
};

/// Thrown when a run is refused by its pre-flight checks (run directory, data, privacy plan), before
/// anything was written: input the user can fix.
class RunRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RunOrchestrator {
 public:
  RunOrchestrator(const Recipe& recipe, ComposedRun components, DatasetOpener open_dataset);

  /// Runs into `run_dir`, which must not exist or be empty (nothing already there is ever
  /// overwritten) unless options.resume. Progress goes to `log`. Throws RunRefused when a pre-flight
  /// check fails (nothing written), std::runtime_error with context on a later failure, RunStopped
  /// when stopped on request.
  RunSummary run(const std::filesystem::path& run_dir, std::ostream& log, const RunOptions& options = {});

  /// run()'s pre-flight checks alone — the data opens, the data-use rule, batch sizes, the privacy
  /// plan and calibration — writing nothing: every check that needs no training (`privdiff
  /// validate`). Throws RunRefused, or RecipeError at the key for a recipe value that cannot be used
  /// (a component's sdk::KeyValueError, e.g. a class the data do not have).
  void check(std::ostream& log);

  /// What the recipe spends as a function of the noise multiplier of its one stage with
  /// noise_multiplier = "auto" (with every other stage's and the initial model's spending): check()'s
  /// pre-flight, writing nothing. `privdiff sweep` calibrates each candidate with it. Throws RunRefused
  /// (or RecipeError) as check() does, and when no stage or more than one is "auto".
  std::function<sdk::PrivacyEvent(double)> planned_spending(std::ostream& log);
  /// How to open the data of the runs this one starts from (init_from); without it the statement
  /// [run] init_from_disjoint is not checked for near-duplicates (and its caveat says so).
  void open_earlier_runs_with(RunDataOpener opener) { open_run_data_ = std::move(opener); }

 private:
  // The phases, one file each: run_orchestrator.cpp (run, check), preflight.cpp, preflight_data.cpp,
  // privacy_plan.cpp, eval_prompts.cpp, run_directory.cpp, stage_runner.cpp, run_reports.cpp.
  /// Where data released by stage `name` is saved, and opening it from there as a dataset.
  std::filesystem::path released_directory(const RunSession& s, const std::string& name) const;
  void open_released(RunSession& s, const std::string& name, std::int64_t classes) const;
  /// [run] device as a device of this machine; throws sdk::engine::DeviceUnavailable.
  c10::Device resolve_run_device() const;
  /// Throws a pre-flight failure as the user's error it is: RecipeError at the key's place in the
  /// recipe for an sdk::KeyValueError, RunRefused for anything else.
  [[noreturn]] void refuse(const std::exception& e) const;

  // The phases of run(), in order. preflight writes nothing, so a refused run leaves no directory.
  void preflight(RunSession& s);
  void open_run_directory(RunSession& s);
  void run_stages(RunSession& s);
  void run_stage(RunSession& s, std::size_t i);
  /// A releasing stage whose release is complete in the run directory (a resumed run): reopens it
  /// instead of running the stage again. False when there is none.
  bool reuse_release(RunSession& s, std::size_t i) const;
  /// After a non-private stage: lets the model fit what depends on public data and saves its figures.
  void show_after_public_stage(RunSession& s, std::size_t i);
  void write_checkpoint(RunSession& s, std::int64_t stage, std::int64_t step, const sdk::StateWriter& state);
  void sample_grid(RunSession& s);
  void run_evals(RunSession& s);
  void write_reports(RunSession& s);
  /// `note`: spending_note of the run, as written to summary.json.
  void print_summary(const RunSession& s, std::int64_t trainable, std::int64_t total_steps, const std::string& note) const;
  /// What the ledger holds beyond the planned steps (carried, redone), in words; empty if nothing.
  std::string spending_note(const RunSession& s, std::int64_t planned_steps) const;

  void open_datasets(RunSession& s);
  void check_public_data(const RunSession& s) const;
  /// The class count from public configuration (the model's num_classes; 0: unconditional).
  std::int64_t public_classes() const;
  /// Refuses data whose image shape or labels the model cannot take (pre-flight).
  void check_data_fits_model(const std::string& name, const sdk::Dataset& data, bool labels) const;
  bool trained_on(const std::string& name) const;  ///< a stage's data (not only read by a mechanism)
  const DataSection* eval_data() const;
  void check_eval_reference(RunSession& s) const;
  /// [[eval]] prompts (eval_prompts.cpp): read, checked against the private captions of the run and its
  /// ancestry (refused at their key, or a caveat with allow_private_prompts), kept in the session.
  void check_eval_prompts(RunSession& s) const;
  /// The prompts that are (or cannot be shown not to be) private captions of the run's data and its
  /// init_from ancestry under this user's key (a resumed run: by its data-records.bin).
  std::vector<PromptMatch> private_eval_prompts(const RunSession& s, const std::vector<Prompt>& prompts) const;
  /// [[eval]] reference = "held_out": refuses a test split sharing records with the private data.
  void check_test_split_is_held_out(RunSession& s, const DataSection& data, std::size_t e) const;
  void check_data_use(RunSession& s) const;
  enum class PublicUse { train, read };  ///< a non-private stage trains on the data; a mechanism reads it
  void check_public_use(const RunSession& s, const std::string& name, const std::string& use, PublicUse how,
                        std::size_t first_private) const;
  /// Public data (a non-private stage's, or a mechanism's public_data) against near-duplicates of the
  /// private records of the run and its ancestry: refused, or a caveat where the data section states
  /// near_duplicates = "caveat" (check_data_use has compared the exact hashes).
  void check_public_near_copies(RunSession& s) const;
  /// The private data of the run (its images) and of its init_from ancestry (record sets, with their
  /// images where those runs can be opened): what every other data the run uses must not share.
  const std::vector<ProtectedData>& protected_data(RunSession& s) const;
  void check_parameter_selections(RunSession& s);
  void prepare_init_from(RunSession& s);
  /// [run] init_from_disjoint against the source's data: throws naming a near-duplicate pair; returns
  /// what was checked, for the statement's caveat.
  std::string check_disjoint_statement(RunSession& s, const InitSource& source) const;
  RunData run_data(const RunSession& s) const;
  void initialise_from_source(RunSession& s);
  void warn_about_short_ema(RunSession& s) const;
  void warn_about_delta(RunSession& s, double delta) const;
  void log_stage_shares(RunSession& s, const sdk::Accountant& accountant, double delta,
                        const std::vector<sdk::PrivacyEvent>& events) const;
  /// Pre-flight: each private stage's best-case noise-to-signal ratio, and a warning where it is high.
  void warn_about_noise(RunSession& s) const;
  sdk::PrivacyEvent plan_privacy(RunSession& s);
  /// The one noise_multiplier = "auto" stage's noise, calibrated so that everything meets the target.
  void calibrate_auto_stage(RunSession& s, std::size_t auto_stage, const sdk::PrivacyEvent& carried, double target,
                            double delta);
  /// Refuses what the accountant cannot evaluate at all, at `stage`'s noise_multiplier (or init_from's
  /// ledger, stage = the number of stages): far too little noise for any target.
  [[noreturn]] void blame_unaccountable(std::size_t stage, const std::string& why) const;
  const sdk::Accountant& main_accountant() const;
  /// [privacy] allow_approximate_accountant: a guarantee by an accountant that is no upper bound.
  bool approximation_allowed() const;

  const Recipe& recipe_;
  ComposedRun components_;
  DatasetOpener open_dataset_;
  RunDataOpener open_run_data_;
  /// Per stage, as set (calibrated or configured) before training: what checkpoints hold and resume
  /// compares; NaN for a non-private stage or one without a single noise multiplier.
  std::vector<double> noise_multipliers_;
  /// Set by plan_privacy: the calibrating accountant's epsilon is an approximation, not an upper bound.
  bool approximate_guarantee_ = false;
};

}  // namespace privdiff::core
