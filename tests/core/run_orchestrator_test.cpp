#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"
#include "util/atomic_file.hpp"
#include "run/run_orchestrator.hpp"
#include "test_support.hpp"

#include <privdiff/privacy/event_json.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;
namespace fs = std::filesystem;

namespace {

// A stand-in dataset with content: record i of `content` is one 2x2 image (the same in every
// dataset of that content), so that datasets share records exactly when the tests say so.
class TinyDataset : public sdk::Dataset {
 public:
  explicit TinyDataset(bool is_public, std::int64_t size = 1000, std::int64_t content = -1, bool reversed = false)
      : public_(is_public), size_(size), content_(content < 0 ? size : content), reversed_(reversed) {}
  std::int64_t size() const override { return size_; }
  at::Tensor images(const at::Tensor& indices) const override {
    const at::Tensor records = record(indices);
    // 4 pixels (the fixture model's 1x2x2) from the record number and the content, as bytes 0..255:
    // distinct for every record of the tests' contents.
    const at::Tensor base = records * 4099 + content_ * 7;
    const at::Tensor x = at::stack({base.remainder(256), base.floor_divide(256).remainder(256),
                                    base.floor_divide(65536).remainder(256), at::full_like(base, 17)}, 1);
    return (x.to(at::kFloat) / 255.0 * 2 - 1).view({-1, 1, 2, 2});
  }
  at::Tensor labels(const at::Tensor& indices) const override { return record(indices).remainder(10); }
  std::int64_t num_classes() const override { return 10; }
  bool is_public() const override { return public_; }
  std::string name() const override { return "tiny"; }

 private:
  at::Tensor record(const at::Tensor& indices) const { return reversed_ ? size_ - 1 - indices.to(at::kLong) : indices.to(at::kLong); }
  bool public_;
  std::int64_t size_, content_;
  bool reversed_;
};

DatasetOpener tiny_data(std::int64_t size = 1000) {
  return [size](const DataSection& data) {
    const auto& c = data.dataset.config;  // fixture_data's `size` when it is not the default
    const std::int64_t n = c.has("size") && c.get_int("size") != 1000 ? c.get_int("size") : size;
    return std::make_unique<TinyDataset>(c.get_bool("public"), n, c.has("content") ? c.get_int("content") : -1,
                                         c.get_bool("reversed"));
  };
}

class RunOrchestratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("privdiff_run_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunSummary run(const std::string& recipe_text, const RunOptions& options = {}) {
    // Every stage needs data: the fixture dataset unless the recipe names its own.
    const std::string text = recipe_text.find("[data") == std::string::npos && recipe_text.find("[[stage]]") != std::string::npos
                                 ? recipe_text + "\n[data]\ndataset = \"fixture_data\"\n"
                                 : recipe_text;
    recipe_ = validate_recipe(RecipeDocument::parse(text, "r.toml"), fixture_registry());
    RunOrchestrator orchestrator(recipe_, compose(recipe_, fixture_registry()), tiny_data());
    return orchestrator.run(dir_, log_, options);
  }
  std::string run_error(const std::string& recipe_text) {
    try {
      run(recipe_text);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
  Recipe recipe_;
  std::ostringstream log_;
};

const std::string private_stage = R"(
[privacy]
epsilon = 8.0
delta = 1e-5
accountant = "fixture_accountant"
[model]
type = "fixture_model"
[[stage]]
name = "train"
mechanism = "fixture_mechanism"
batch_size = 100
steps = 20
)";

}  // namespace

TEST_F(RunOrchestratorTest, ARecipeWithoutStagesWritesTheRunDirectory) {
  run("[privacy]\ndelta = 1e-5\naccountant = \"fixture_accountant\"\n");
  EXPECT_TRUE(fs::exists(dir_ / "recipe.toml"));
  EXPECT_TRUE(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).entries().empty());
  const auto report = nlohmann::json::parse(read_file(dir_ / "privacy.json"));
  EXPECT_EQ(report["results"][0]["accountant"], "fixture_accountant");
  EXPECT_DOUBLE_EQ(report["results"][0]["epsilon"].get<double>(), 0.0);
}

TEST_F(RunOrchestratorTest, RecordsOneLedgerEntryPerStepAndReportsEpsilon) {
  const auto summary = run(private_stage + "noise_multiplier = 5.0\n");
  const auto step = sdk::PrivacyEvent::poisson_sampled(0.1, sdk::PrivacyEvent::gaussian(5.0));
  ASSERT_EQ(summary.ledger.entries().size(), 1u);
  EXPECT_EQ(summary.ledger.entries()[0], sdk::PrivacyEvent::self_composed(step, 20));
  // What is on disk is what was spent.
  EXPECT_EQ(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).entries(), summary.ledger.entries());
  const double rho = 20 * 0.5 / 25.0;
  const double expected = rho + 2 * std::sqrt(rho * std::log(1e5));
  const auto report = nlohmann::json::parse(read_file(dir_ / "privacy.json"));
  EXPECT_NEAR(report["results"][0]["epsilon"].get<double>(), expected, 1e-12);
  EXPECT_NEAR(report["results"][0]["rho"].get<double>(), rho, 1e-15);
}

TEST_F(RunOrchestratorTest, CalibratesAutoNoiseToTheTargetWithoutOvershooting) {
  const auto summary = run(private_stage);  // noise_multiplier defaults to "auto"
  ASSERT_EQ(summary.privacy.size(), 1u);
  EXPECT_LE(summary.privacy[0].result.epsilon, 8.0);
  EXPECT_GT(summary.privacy[0].result.epsilon, 8.0 * 0.99);
  EXPECT_NE(log_.str().find("calibrated stage 'train' noise multiplier"), std::string::npos) << log_.str();
}

TEST_F(RunOrchestratorTest, CalibrationAccountsForTheOtherStages) {
  // A fixed private stage spends part of the budget; the auto stage gets the rest.
  const auto summary = run(private_stage + R"(
[[stage]]
name = "second"
mechanism = "fixture_mechanism"
batch_size = 100
steps = 20
noise_multiplier = 6.0
)");
  ASSERT_EQ(summary.privacy.size(), 1u);
  EXPECT_LE(summary.privacy[0].result.epsilon, 8.0);
  EXPECT_GT(summary.privacy[0].result.epsilon, 8.0 * 0.99);
}

TEST_F(RunOrchestratorTest, CalibrationSaysWhenTheOtherStagesAloneExceedTheTarget) {
  const std::string error = run_error(private_stage + R"(
[[stage]]
name = "second"
mechanism = "fixture_mechanism"
batch_size = 100
steps = 20
noise_multiplier = 3.0
)");
  EXPECT_EQ(error.rfind("privacy: the stages other than 'train' already spend epsilon 8.264", 0), 0u) << error;
}

TEST_F(RunOrchestratorTest, RefusesToStartOverTheTargetAndSaysByHowMuch) {
  const std::string error = run_error(private_stage + "noise_multiplier = 1.0\n");
  EXPECT_NE(error.find("privacy: the stages plan to spend epsilon"), std::string::npos) << error;
  EXPECT_NE(error.find("over the target 8 by"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_));  // refused before the run directory was made
}

TEST_F(RunOrchestratorTest, PrivateStagesNeedATarget) {
  EXPECT_EQ(run_error("[model]\ntype = \"fixture_model\"\n[[stage]]\nmechanism = \"fixture_mechanism\"\n"
                      "batch_size = 10\nnoise_multiplier = 1.0\n"),
            "privacy: this recipe has private stages; set [privacy] epsilon and delta");
}

TEST_F(RunOrchestratorTest, NonPrivateMechanismsRefusePrivateData) {
  const std::string recipe =
      "[model]\ntype = \"fixture_model\"\n[[stage]]\nname = \"pretrain\"\nmechanism = \"fixture_mechanism\"\n"
      "private = false\nbatch_size = 10\n";
  EXPECT_EQ(run_error(recipe),
            "stage[0] 'pretrain': mechanism 'fixture_mechanism' is not private and may only train on data marked "
            "public ([data] public = true, or a public dataset such as glyphs); tiny is private");
  fs::remove_all(dir_);
  const auto summary = run(recipe + "[data]\ndataset = \"fixture_data\"\npublic = true\n");
  EXPECT_TRUE(summary.ledger.entries().empty());
}

TEST_F(RunOrchestratorTest, NeverWritesIntoANonEmptyRunDirectory) {
  fs::create_directories(dir_);
  write_file_atomically(dir_ / "precious.txt", "keep me");
  const std::string error = run_error("");
  EXPECT_NE(error.find("already exists and is not empty"), std::string::npos) << error;
  EXPECT_EQ(read_file(dir_ / "precious.txt"), "keep me");
  EXPECT_FALSE(fs::exists(dir_ / "recipe.toml"));
}

// A run killed while writing its first file (recipe.toml) leaves only recipe.toml.tmp.PID: starting
// the run again into that directory works (the leftover is cleared), where any other file refuses.
TEST_F(RunOrchestratorTest, ADirectoryHoldingOnlyAKilledWritesTemporaryFileIsUsed) {
  fs::create_directories(dir_);
  { std::ofstream(dir_ / "recipe.toml.tmp.12345") << "[run"; }
  (void)run(private_stage + "noise_multiplier = 5.0\n");
  EXPECT_FALSE(fs::exists(dir_ / "recipe.toml.tmp.12345"));
  EXPECT_TRUE(fs::exists(dir_ / "recipe.toml"));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  { std::ofstream(dir_ / "recipe.toml.tmp.12x") << "not ours"; }
  EXPECT_NE(run_error(private_stage + "noise_multiplier = 5.0\n").find("already exists and is not empty"),
            std::string::npos);
}

// Defect 4 of the privacy audit: `public = true` on the one [data] section must not let a
// non-private stage train on the records a private stage of the same run protects.
TEST_F(RunOrchestratorTest, ANonPrivateStageIsRefusedOnDataAPrivateStageUses) {
  const std::string error = run_error(private_stage + R"(noise_multiplier = 5.0
[[stage]]
name = "pretrain"
mechanism = "fixture_mechanism"
private = false
batch_size = 10
[data]
dataset = "fixture_data"
public = true
)");
  EXPECT_EQ(error,
            "stage[1] 'pretrain': mechanism 'fixture_mechanism' is not private, but stage[0] 'train' trains privately "
            "on the same data (tiny): data a private stage protects cannot also be public; train the non-private "
            "stage on other data, or make it private");
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(RunOrchestratorTest, ARunWithoutCaveatsSaysSoAndPrivateDiagnosticsAddOne) {
  run(private_stage + "noise_multiplier = 5.0\n");
  auto report = nlohmann::json::parse(read_file(dir_ / "privacy.json"));
  ASSERT_TRUE(report.contains("caveats"));
  EXPECT_TRUE(report["caveats"].empty());
  EXPECT_TRUE(nlohmann::json::parse(read_file(dir_ / "summary.json"))["caveats"].empty());
  // Private steps log neither their loss nor their realised batch size...
  std::istringstream lines(read_file(dir_ / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_FALSE(j.contains("examples") || j.contains("loss")) << line;
  }
  // ...unless asked to, and then the run says so wherever its privacy is reported.
  fs::remove_all(dir_);
  run(private_stage + "noise_multiplier = 5.0\n[run]\nprivate_diagnostics = true\n");
  report = nlohmann::json::parse(read_file(dir_ / "privacy.json"));
  ASSERT_EQ(report["caveats"].size(), 1u);
  EXPECT_NE(report["caveats"][0].get<std::string>().find("private_diagnostics"), std::string::npos);
  EXPECT_EQ(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).caveats().size(), 1u);
  EXPECT_NE(log_.str().find("CAVEAT"), std::string::npos);
  const std::string metrics = read_file(dir_ / "metrics.jsonl");
  const auto first = nlohmann::json::parse(metrics.substr(0, metrics.find('\n')));
  EXPECT_EQ(first["examples"], 100);
}

// Defect 7: steps spent after the last checkpoint by a run that then failed stay in the ledger;
// resuming from the checkpoint spends the redone steps again (never less than was spent).
TEST_F(RunOrchestratorTest, TheLedgerNeverShrinksAcrossAFailureAndAResume) {
  const std::string recipe = private_stage + "noise_multiplier = 5.0\n[run]\ncheckpoint_every = 5\n";
  RunOptions crash;
  int polls = 0;
  crash.stop_requested = [&] {
    if (++polls == 7) throw std::runtime_error("simulated crash after step 7");
    return false;
  };
  EXPECT_THROW(run(recipe, crash), std::runtime_error);
  EXPECT_EQ(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).steps(), 7);  // checkpoint at 5
  std::ofstream(dir_ / "checkpoint.pt.tmp.4242") << "torn";  // left by a kill mid-write
  RunOptions resume;
  resume.resume = true;
  const auto summary = run(recipe, resume);
  EXPECT_EQ(summary.ledger.steps(), 7 + 15);  // steps 6..20 redone on top of the 7 spent
  EXPECT_EQ(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).steps(), 22);
  EXPECT_NE(log_.str().find("ledger.json records 2 step(s) beyond checkpoint.pt"), std::string::npos) << log_.str();
  EXPECT_FALSE(fs::exists(dir_ / "checkpoint.pt.tmp.4242"));  // stale temporaries are removed on resume
  // The summary says why the ledger holds more than the 20 planned steps (issue 29), and that the
  // over-target epsilon is theirs.
  const auto j = nlohmann::json::parse(read_file(dir_ / "summary.json"));
  EXPECT_EQ(j["ledger_steps"], 22);
  EXPECT_EQ(j["ledger_note"], "2 redone after an interruption and spent again");
  EXPECT_NE(log_.str().find("20 private steps (the ledger holds 22: 2 redone after an interruption and spent again)"),
            std::string::npos) << log_.str();
}

// Issue 50, finding 5: an accountant that is no upper bound calibrated a recipe silently. It is refused
// before anything is written, unless the recipe opts in; then every report carries the caveat.
TEST_F(RunOrchestratorTest, AnApproximateAccountantIsRefusedUnlessOptedIntoAndThenCaveated) {
  std::string approximate = private_stage + "noise_multiplier = 5.0\n";
  approximate.replace(approximate.find("\"fixture_accountant\""), 20, "\"fixture_approximate_accountant\"");
  const std::string why = run_error(approximate);
  EXPECT_NE(why.find("does not certify an upper bound"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(dir_ / "ledger.json"));
  approximate.replace(approximate.find("[model]"), 7, "allow_approximate_accountant = true\n[model]");
  run(approximate);
  for (const char* file : {"privacy.json", "summary.json", "ledger.json"}) {
    const auto report = nlohmann::json::parse(read_file(dir_ / file));
    ASSERT_EQ(report["caveats"].size(), 1u) << file;
    EXPECT_NE(report["caveats"][0].get<std::string>().find("fixture_approximate_accountant"), std::string::npos) << file;
  }
  const auto privacy = nlohmann::json::parse(read_file(dir_ / "privacy.json"));
  EXPECT_EQ(privacy["results"][0]["upper_bound"], false);
}

TEST_F(RunOrchestratorTest, ADeltaNotBelowOneOverNIsWarnedAbout) {
  run(private_stage + "noise_multiplier = 5.0\n");
  EXPECT_EQ(log_.str().find("is not below 1/N"), std::string::npos);
  fs::remove_all(dir_);
  std::string loose = private_stage + "noise_multiplier = 5.0\n";
  loose.replace(loose.find("delta = 1e-5"), 12, "delta = 0.01");
  run(loose);
  EXPECT_NE(log_.str().find("warning: privacy.delta 0.01 is not below 1/N = 0.001 (N = 1000 private records)"),
            std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("see docs/accountants.md#choosing-delta"), std::string::npos) << log_.str();
}

// A run can be watched from its directory: metrics.jsonl and ledger.json are up to date within a
// couple of seconds (here: the first step's), not only at checkpoints.
TEST_F(RunOrchestratorTest, MetricsAndLedgerAreWrittenBetweenCheckpoints) {
  RunOptions watch;
  int polls = 0;
  std::int64_t ledger_steps = -1;
  std::size_t metric_lines = 0;
  watch.stop_requested = [&] {
    if (++polls == 3) {
      ledger_steps = sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).steps();
      std::istringstream lines(read_file(dir_ / "metrics.jsonl"));
      for (std::string line; std::getline(lines, line);) ++metric_lines;
    }
    return false;
  };
  run(private_stage + "noise_multiplier = 5.0\n[run]\ncheckpoint_every = 0\n", watch);
  EXPECT_GE(ledger_steps, 1);
  EXPECT_GE(metric_lines, 1u);
}

// A run's ledger is about the records it trained on: resuming it on other data is refused.
TEST_F(RunOrchestratorTest, ResumingOnDifferentDataIsRefused) {
  RunOptions stop;
  stop.stop_after_steps = 3;
  EXPECT_THROW(run(private_stage + "noise_multiplier = 5.0\n", stop), RunStopped);
  RunOrchestrator other_data(recipe_, compose(recipe_, fixture_registry()), tiny_data(999));
  RunOptions resume;
  resume.resume = true;
  try {
    other_data.run(dir_, log_, resume);
    FAIL() << "resumed on other data";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the data differs from the data it trained on (checkpoint: tiny|N=1000"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).steps(), 3);  // untouched
}

// A run is resumed only with the code it ran (issue 67): another library for any component — here the
// mechanism's, as a plugin shadowing it would give — is refused naming both; the same code resumes. A
// checkpoint that records none (an older privdiff) resumes with a warning.
TEST_F(RunOrchestratorTest, ResumingWithAnotherLibraryForAComponentIsRefused) {
  const ComponentLibrary started{"mechanism", "fixture_mechanism", "/plugins/libmine.so", std::string(64, '1')};
  const ComponentLibrary accountant{"accountant", "fixture_accountant", "/plugins/libfix.so", std::string(64, '2')};
  RunOptions stop;
  stop.stop_after_steps = 3;
  stop.libraries = {started, accountant};
  EXPECT_THROW(run(private_stage + "noise_multiplier = 5.0\n", stop), RunStopped);
  RunOptions resume;
  resume.resume = true;
  resume.libraries = {ComponentLibrary{"mechanism", "fixture_mechanism", "/elsewhere/libhalf.so", std::string(64, '3')},
                      accountant};
  RunOrchestrator again(recipe_, compose(recipe_, fixture_registry()), tiny_data());
  try {
    again.run(dir_, log_, resume);
    FAIL() << "resumed with another mechanism library";
  } catch (const RunRefused& e) {
    EXPECT_EQ(std::string(e.what()), "cannot resume " + dir_.string() + ": mechanism 'fixture_mechanism' ran from "
                                     "/plugins/libmine.so (sha256 " + std::string(64, '1') + ") and would now run from "
                                     "/elsewhere/libhalf.so (sha256 " + std::string(64, '3') + "); a resumed run must "
                                     "run the code it was started with (restore that library, or start a new run)");
  }
  EXPECT_EQ(sdk::privacy_ledger_from_json(read_file(dir_ / "ledger.json")).steps(), 3);  // untouched
  resume.libraries = {accountant, started};
  resume.stop_after_steps = 2;
  RunOrchestrator same(recipe_, compose(recipe_, fixture_registry()), tiny_data());
  EXPECT_THROW(same.run(dir_, log_, resume), RunStopped);
  EXPECT_EQ(log_.str().find("does not record its components' libraries"), std::string::npos);

  fs::remove_all(dir_);  // a checkpoint without the record
  RunOptions unrecorded;
  unrecorded.stop_after_steps = 3;
  EXPECT_THROW(run(private_stage + "noise_multiplier = 5.0\n", unrecorded), RunStopped);
  RunOrchestrator older(recipe_, compose(recipe_, fixture_registry()), tiny_data());
  resume.stop_after_steps = 0;
  EXPECT_EQ(older.run(dir_, log_, resume).ledger.steps(), 20);
  EXPECT_NE(log_.str().find("warning: " + (dir_ / "checkpoint.pt").string() + " does not record its components' "
                            "libraries (written by an older privdiff): the resumed run cannot be checked to run the "
                            "code it was started with"),
            std::string::npos)
      << log_.str();
}

// Several datasets in one recipe: each stage trains on the one it names; the ledger and q concern
// the private one only, and a public stage spends nothing.
const std::string two_datasets = R"(
[privacy]
epsilon = 8.0
delta = 1e-5
accountant = "fixture_accountant"
[model]
type = "fixture_model"
[data.public]
dataset = "fixture_data"
public = true
size = 500
[data.private]
dataset = "fixture_data"
[[stage]]
name = "pretrain"
mechanism = "fixture_mechanism"
private = false
batch_size = 10
data = "public"
[[stage]]
name = "finetune"
mechanism = "fixture_mechanism"
batch_size = 100
steps = 7
noise_multiplier = 5.0
data = "private"
)";

TEST_F(RunOrchestratorTest, StagesTrainOnTheDatasetTheyNameAndOnlyPrivateOnesSpend) {
  const auto summary = run(two_datasets);
  EXPECT_EQ(summary.ledger.steps(), 7);
  const auto events = sdk::gaussian_steps(summary.ledger.total());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_DOUBLE_EQ(events.front().sampling_rate, 100.0 / 1000);  // the private dataset's N
  const auto j = nlohmann::json::parse(read_file(dir_ / "summary.json"));
  EXPECT_EQ(j["stages"][0]["data"], "public");
  EXPECT_EQ(j["data_use"]["private"].size(), 1u);
  EXPECT_EQ(j["data_use"]["public"].size(), 1u);
}

TEST_F(RunOrchestratorTest, TheSameRecordsCannotBeBothPublicAndPrivate) {
  std::string recipe = two_datasets;
  recipe.replace(recipe.find("size = 500\n"), 11, "");  // the "public" section now reads the private records
  EXPECT_NE(run_error(recipe).find("trains privately on data that shares 1000 of its records"), std::string::npos)
      << run_error(recipe);
}

TEST_F(RunOrchestratorTest, AStageMustNameItsDatasetWhenThereAreSeveral) {
  std::string recipe = two_datasets;
  recipe.replace(recipe.find("data = \"public\"\n"), 16, "");
  EXPECT_NE(run_error(recipe).find("stage[0].data: the recipe defines several datasets (private, public)"),
            std::string::npos)
      << run_error(recipe);
}

// init_from: the ledger of a source that trained privately on the same data is composed into the
// new run's; a public source carries nothing; a different model is a clear error.
TEST_F(RunOrchestratorTest, InitFromAPrivateRunOnTheSameDataCarriesItsLedger) {
  const fs::path source = dir_.string() + "_source";
  fs::remove_all(source);
  recipe_ = validate_recipe(RecipeDocument::parse(private_stage + "noise_multiplier = 5.0\n[data]\ndataset = \"fixture_data\"\n", "a.toml"),
                            fixture_registry());
  RunOrchestrator(recipe_, compose(recipe_, fixture_registry()), tiny_data()).run(source, log_);
  const auto summary = run(private_stage + "noise_multiplier = 5.0\n[run]\ninit_from = \"" + source.string() + "\"\n");
  EXPECT_EQ(summary.ledger.steps(), 40);  // the source's 20 steps and this run's 20
  const auto init = nlohmann::json::parse(read_file(dir_ / "init_from.json"));
  EXPECT_TRUE(init["carried"].get<bool>());
  EXPECT_EQ(init["checkpoint"], fs::absolute(source / "checkpoint.pt").string());

  // The same source for a run on other records: carried too (they may show the same people).
  fs::remove_all(dir_);
  recipe_ = validate_recipe(RecipeDocument::parse(private_stage + "noise_multiplier = 5.0\n[data]\ndataset = "
                                                  "\"fixture_data\"\n[run]\ninit_from = \"" + source.string() + "\"\n",
                                                  "b.toml"),
                            fixture_registry());
  const auto elsewhere = RunOrchestrator(recipe_, compose(recipe_, fixture_registry()), tiny_data(999)).run(dir_, log_);
  EXPECT_EQ(elsewhere.ledger.steps(), 40);
  fs::remove_all(source);
}

TEST_F(RunOrchestratorTest, InitFromAPublicRunCarriesNothingAndAnotherModelIsRefused) {
  const fs::path source = dir_.string() + "_public";
  fs::remove_all(source);
  const std::string pretrain =
      "[model]\ntype = \"fixture_model\"\n[[stage]]\nname = \"pretrain\"\nmechanism = \"fixture_mechanism\"\n"
      "private = false\nbatch_size = 10\n[data]\ndataset = \"fixture_data\"\npublic = true\nsize = 500\n";
  recipe_ = validate_recipe(RecipeDocument::parse(pretrain, "p.toml"), fixture_registry());
  RunOrchestrator(recipe_, compose(recipe_, fixture_registry()), tiny_data()).run(source, log_);
  const std::string init = "[run]\ninit_from = \"" + source.string() + "\"\n";
  EXPECT_EQ(run(private_stage + "noise_multiplier = 5.0\n" + init).ledger.steps(), 20);
  EXPECT_FALSE(nlohmann::json::parse(read_file(dir_ / "init_from.json"))["carried"].get<bool>());

  fs::remove_all(dir_);
  std::string wider = private_stage + "noise_multiplier = 5.0\n" + init;
  wider.replace(wider.find("type = \"fixture_model\"\n"), 23, "type = \"fixture_model\"\nwidth = 5\n");
  const std::string error = run_error(wider);
  EXPECT_NE(error.find("'linear.weight' is [4, 4] in"), std::string::npos) << error;
  EXPECT_NE(error.find("but [5, 4] in this recipe's [model]"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_ / "ledger.json"));

  // The public source's data cannot be this run's private data.
  fs::remove_all(dir_);
  std::string on_public_data = private_stage + "noise_multiplier = 5.0\n" + init + "[data]\ndataset = \"fixture_data\"\nsize = 500\n";
  EXPECT_NE(run_error(on_public_data).find("trained non-privately on 500 records of this run's private data"), std::string::npos)
      << run_error(on_public_data);
  fs::remove_all(source);
}

// A run started from another resumes from what it recorded at its start (init_from.json), even
// when the source is gone: the carried ledger stays carried, calibration stays the same.
TEST_F(RunOrchestratorTest, AnInitFromRunResumesWithoutItsSource) {
  const fs::path source = dir_.string() + "_gone";
  fs::remove_all(source);
  const std::string data = "[data]\ndataset = \"fixture_data\"\n";
  recipe_ = validate_recipe(RecipeDocument::parse(private_stage + "noise_multiplier = 5.0\n" + data, "a.toml"),
                            fixture_registry());
  RunOrchestrator(recipe_, compose(recipe_, fixture_registry()), tiny_data()).run(source, log_);
  RunOptions stop;
  stop.stop_after_steps = 5;
  // Calibrated against the target with the carried steps counted.
  const std::string recipe = private_stage + "noise_multiplier = \"auto\"\n" + data;
  EXPECT_THROW(run(recipe + "[run]\ninit_from = \"" + source.string() + "\"\n", stop), RunStopped);
  fs::remove_all(source);
  RunOptions resume;
  resume.resume = true;
  RunOrchestrator again(recipe_, compose(recipe_, fixture_registry()), tiny_data());
  EXPECT_EQ(again.run(dir_, log_, resume).ledger.steps(), 40);
}

// Issue 25: whether a source's ledger is carried is decided on the records, not on names: any
// copy of the source's private records carries. Issue 36: records that differ in content can still
// be the same people, so other records carry too, unless the user states they are disjoint — which
// puts a caveat on the run, and which records the source shares refute.
class InitFromByContent : public RunOrchestratorTest {
 protected:
  void SetUp() override {
    RunOrchestratorTest::SetUp();
    source_ = dir_.string() + "_source";
    fs::remove_all(source_);
    recipe_ = validate_recipe(RecipeDocument::parse(private_stage + "noise_multiplier = 5.0\n[data]\ndataset = "
                                                    "\"fixture_data\"\n", "a.toml"),
                              fixture_registry());
    RunOrchestrator(recipe_, compose(recipe_, fixture_registry()), tiny_data()).run(source_, log_);
  }
  void TearDown() override {
    fs::remove_all(source_);
    RunOrchestratorTest::TearDown();
  }
  // This run: 20 private steps on `data` from the source.
  std::string from_source(const std::string& data, const std::string& run = "") const {
    return private_stage + "noise_multiplier = 5.0\n[data]\ndataset = \"fixture_data\"\n" + data + "[run]\ninit_from = \"" +
           source_.string() + "\"\n" + run;
  }
  std::int64_t steps_after(const std::string& recipe) {
    fs::remove_all(dir_);
    return run(recipe).ledger.steps();
  }
  fs::path source_;
};

TEST_F(InitFromByContent, EveryCopyOfTheSourcesRecordsCarriesItsLedger) {
  EXPECT_EQ(steps_after(from_source("")), 40);                              // the same data
  EXPECT_EQ(steps_after(from_source("size = 500\ncontent = 1000\n")), 40);  // a subset
  EXPECT_EQ(steps_after(from_source("reversed = true\n")), 40);             // reordered
  EXPECT_EQ(steps_after(from_source("size = 1001\ncontent = 1000\n")), 40);  // a superset
  EXPECT_EQ(steps_after(from_source("size = 999\n")), 40);                  // other records: carried all the same
  EXPECT_NE(nlohmann::json::parse(read_file(dir_ / "init_from.json"))["reason"].get<std::string>().find(
                "can still show the same people"),
            std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(read_file(dir_ / "privacy.json"))["caveats"].empty());
  // Stated disjoint: nothing carried, and the statement is a caveat on the guarantee.
  EXPECT_EQ(steps_after(from_source("size = 999\n", "init_from_disjoint = true\n")), 20);
  const auto caveats = nlohmann::json::parse(read_file(dir_ / "privacy.json"))["caveats"];
  ASSERT_EQ(caveats.size(), 1u);
  EXPECT_NE(caveats[0].get<std::string>().find("init_from_disjoint: the user states"), std::string::npos) << caveats;
  EXPECT_NE(caveats[0].get<std::string>().find("not checked for near-duplicates"), std::string::npos) << caveats;
}

TEST_F(InitFromByContent, DataThatCannotBeComparedCarriesUnlessStatedDisjointWithACaveat) {
  const char* saved = std::getenv("PRIVDIFF_RECORD_KEY");
  const std::string before = saved ? saved : "";
  const fs::path other_key = dir_.string() + "_other.key";
  ::setenv("PRIVDIFF_RECORD_KEY", other_key.c_str(), 1);  // another machine's key
  EXPECT_EQ(steps_after(from_source("size = 999\n")), 40);  // disjoint, but it cannot be shown
  EXPECT_NE(nlohmann::json::parse(read_file(dir_ / "init_from.json"))["reason"].get<std::string>().find(
                "cannot be compared"),
            std::string::npos);
  EXPECT_EQ(steps_after(from_source("size = 999\n", "init_from_disjoint = true\n")), 20);
  const auto privacy = nlohmann::json::parse(read_file(dir_ / "privacy.json"));
  ASSERT_EQ(privacy["caveats"].size(), 1u);
  EXPECT_NE(privacy["caveats"][0].get<std::string>().find("init_from_disjoint"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(read_file(dir_ / "summary.json"))["caveats"], privacy["caveats"]);
  if (saved) ::setenv("PRIVDIFF_RECORD_KEY", before.c_str(), 1); else ::unsetenv("PRIVDIFF_RECORD_KEY");
  fs::remove(other_key);

  // Under the source's key, a statement that contradicts the records is refused.
  fs::remove_all(dir_);
  const std::string error = run_error(from_source("size = 500\ncontent = 1000\n", "init_from_disjoint = true\n"));
  EXPECT_NE(error.find("you state that this run's private data and the source's are disjoint, but 500 records"),
            std::string::npos) << error;
  EXPECT_NE(error.find("see docs/privacy.md#init_from-carrying-the-sources-ledger"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(InitFromByContent, PublicDataThatSharesTheSourcesPrivateRecordsIsRefused) {
  const std::string two = private_stage + "noise_multiplier = 5.0\n[data.private]\ndataset = \"fixture_data\"\nsize = 999\n"
                          "[data.public]\ndataset = \"fixture_data\"\npublic = true\nsize = 10\ncontent = 1000\n"
                          "[[stage]]\nname = \"warm\"\nmechanism = \"fixture_mechanism\"\nprivate = false\n"
                          "batch_size = 5\ndata = \"public\"\n[run]\ninit_from = \"" + source_.string() + "\"\n";
  std::string recipe = two;
  recipe.replace(recipe.find("name = \"train\"\n"), 15, "name = \"train\"\ndata = \"private\"\n");
  const std::string error = run_error(recipe);
  EXPECT_NE(error.find("trains non-privately on tiny, which shares 10 records with data the initial model's run"),
            std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_));
}
