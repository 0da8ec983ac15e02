#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"
#include "util/atomic_file.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;

TEST(RecipeValidator, ConvertsEverySectionAndFillsDefaults) {
  const auto doc = RecipeDocument::parse(read_file(fixture_path("recipes/valid/full.toml")), "full.toml");
  const Recipe r = validate_recipe(doc, fixture_registry());
  EXPECT_EQ(r.run.get_string("name"), "fixture-run");
  EXPECT_EQ(r.run.get_int("seed"), 3);
  EXPECT_EQ(r.run.get_int("threads"), 0);  // default
  EXPECT_DOUBLE_EQ(r.privacy.get_double("delta"), 1e-5);
  ASSERT_EQ(r.datasets.size(), 1u);
  EXPECT_EQ(r.datasets[0].name, "data");
  EXPECT_EQ(r.datasets[0].dataset.id, "fixture_data");
  EXPECT_EQ(r.datasets[0].dataset.config.get_int("size"), 1000);  // the plugin's default
  EXPECT_EQ(*r.datasets[0].classes, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(r.stages[0].data, "data");  // the only dataset
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->id, "fixture_model");
  EXPECT_EQ(r.model->config.get_int("channels"), 16);
  EXPECT_DOUBLE_EQ(r.model->config.get_double("dropout"), 0.0);
  EXPECT_TRUE(r.model->config.get_bool("attention"));  // default
  EXPECT_FALSE(r.model->config.has("type"));            // the selector is not a component key
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[0].name, "pretrain");
  EXPECT_FALSE(r.stages[0].mechanism.config.has("name"));
  EXPECT_TRUE(r.stages[0].mechanism.config.is_keyword("noise_multiplier", "auto"));
  EXPECT_DOUBLE_EQ(r.stages[1].mechanism.config.get_double("noise_multiplier"), 3.0);
  EXPECT_EQ(r.stages[1].mechanism.config.path(), "stage[1]");
  ASSERT_TRUE(r.sampler);
  EXPECT_EQ(r.sampler->config.get_int("steps"), 50);
  EXPECT_EQ(r.accountant_ids, std::vector<std::string>{"fixture_accountant"});
}

TEST(RecipeValidator, RunNameDefaultsToTheFileName) {
  const auto doc = RecipeDocument::parse("", "dir/my-recipe.toml");
  EXPECT_EQ(validate_recipe(doc, fixture_registry()).run.get_string("name"), "my-recipe");
}

TEST(RecipeValidator, ResolvedRecipeValidatesToTheSameValues) {
  const auto doc = RecipeDocument::parse(read_file(fixture_path("recipes/valid/full.toml")), "full.toml");
  const Recipe r = validate_recipe(doc, fixture_registry());
  const Recipe again = validate_recipe(RecipeDocument::parse(r.to_toml(), "resolved.toml"), fixture_registry());
  EXPECT_EQ(again.to_toml().substr(again.to_toml().find('\n')), r.to_toml().substr(r.to_toml().find('\n')));
  EXPECT_EQ(again.model->config.values(), r.model->config.values());
  EXPECT_EQ(again.stages[1].mechanism.config.values(), r.stages[1].mechanism.config.values());
}

TEST(RecipeValidator, AccountantOptionTablesAreChecked) {
  const auto doc = RecipeDocument::parse(
      "[privacy]\naccountant = \"fixture_accountant\"\n[accountants.fixture_accountant]\neps_error = 0.1\n"
      "[accountants.prv]\n",
      "r.toml");
  try {
    validate_recipe(doc, fixture_registry());
    FAIL();
  } catch (const RecipeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "r.toml:4:1: accountants.fixture_accountant.eps_error: unknown key 'eps_error'; valid keys: none\n"
              "r.toml:5:1: accountants.prv: unknown accountant 'prv'; available accountants: fixture_accountant, "
              "fixture_approximate_accountant");
  }
}

TEST(RecipeValidator, MalformedTomlGivesThePosition) {
  try {
    RecipeDocument::parse("[model]\ntype = \n", "bad.toml");
    FAIL();
  } catch (const RecipeError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics()[0].location, "bad.toml:2:8");
    EXPECT_EQ(e.diagnostics()[0].message.rfind("malformed TOML: ", 0), 0u);
  }
}

TEST(RecipeValidator, UnreadableFile) {
  try {
    RecipeDocument::load("/nonexistent/recipe.toml");
    FAIL();
  } catch (const RecipeError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/recipe.toml: cannot read recipe file (does it exist?)");
  }
}

TEST(RecipeValidator, PluginSearchIsRelativeToTheRecipe) {
  const auto doc = RecipeDocument::parse("[plugins]\nsearch = [\"../plugins\", \"/abs\"]\n", "/a/b/r.toml");
  const auto dirs = recipe_plugin_directories(doc);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], std::filesystem::path("/a/b/../plugins"));
  EXPECT_EQ(dirs[1], std::filesystem::path("/abs"));
}

TEST(RecipeValidator, NamedDatasetsAndStageDataAreChecked) {
  const auto doc = RecipeDocument::parse(R"([model]
type = "fixture_model"
[data.public]
dataset = "fixture_data"
public = true
[data.private]
dataset = "fixture_dat"
[[stage]]
mechanism = "fixture_mechanism"
batch_size = 10
data = "privat"
)", "r.toml");
  try {
    validate_recipe(doc, fixture_registry());
    FAIL() << "accepted";
  } catch (const RecipeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("data.private.dataset: unknown dataset 'fixture_dat' (did you mean 'fixture_data'?)"),
              std::string::npos) << what;
    EXPECT_NE(what.find("stage[0].data: unknown dataset 'privat' (did you mean 'private'?)"), std::string::npos) << what;
  }
  const auto mixed = RecipeDocument::parse("[data]\ndataset = \"fixture_data\"\n[data.extra]\ndataset = \"fixture_data\"\n", "m.toml");
  EXPECT_THROW(validate_recipe(mixed, fixture_registry()), RecipeError);
}

namespace {
std::string validation_errors(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto doc = RecipeDocument::parse(text, "r.toml");
  auto earlier = doc.apply_overrides(overrides);
  try {
    validate_recipe(doc, fixture_registry(), std::move(earlier));
  } catch (const RecipeError& e) {
    return e.what();
  }
  return "(valid)";
}
}  // namespace

TEST(RecipeValidator, NumbersMustBeFinite) {
  // TOML has inf and nan, and "> 0" does not exclude inf: epsilon = inf was refused later, without
  // its place in the recipe.
  const std::string accountant = "accountant = \"fixture_accountant\"\n";
  EXPECT_EQ(validation_errors("[privacy]\nepsilon = inf\ndelta = 1e-5\n" + accountant),
            "r.toml:2:11: privacy.epsilon: expected a finite number > 0, got inf");
  EXPECT_EQ(validation_errors("[privacy]\nepsilon = 1.0\n" + accountant, {"privacy.epsilon=inf"}),
            "--set 'privacy.epsilon=inf': privacy.epsilon: expected a finite number > 0, got inf");
  EXPECT_EQ(validation_errors("[model]\ntype = \"fixture_model\"\ndropout = nan\n"),
            "r.toml:3:11: model.dropout: expected number in [0, 1], got nan");  // a range already refuses nan
  EXPECT_EQ(validation_errors("[privacy]\nepsilon = 1e308\ndelta = 1e-5\n" + accountant), "(valid)");
}

TEST(RecipeValidator, InitFromDisjointNeedsInitFrom) {
  EXPECT_EQ(validation_errors("[run]\ninit_from_disjoint = true\n"),
            "r.toml:2:22: run.init_from_disjoint: true states that this run's data and those of the run it starts "
            "from are disjoint, but [run] has no init_from: set run.init_from = \"RUN_DIR\" (the run to start from), or "
            "remove init_from_disjoint");
  EXPECT_EQ(validation_errors("[run]\ninit_from_disjoint = false\n"), "(valid)");
  EXPECT_EQ(validation_errors("[run]\ninit_from = \"runs/a\"\ninit_from_disjoint = true\n"), "(valid)");
}

TEST(RecipeValidator, KeepsWhereEachKeyIsForLaterChecks) {
  auto doc = RecipeDocument::parse(R"([model]
type = "fixture_model"
channels = 8
[[stage]]
mechanism = "fixture_mechanism"
batch_size = 10
)", "r.toml");
  auto earlier = doc.apply_overrides({"stage.0.batch_size=12"});
  const Recipe r = validate_recipe(doc, fixture_registry(), std::move(earlier));
  EXPECT_EQ(r.diagnostic("model.channels", "too many").to_string(), "r.toml:3:12: model.channels: too many");
  EXPECT_EQ(r.diagnostic("model.type", "x").to_string(), "r.toml:2:8: model.type: x");
  // A key left at its default: its section's place.
  EXPECT_EQ(r.diagnostic("model.attention", "x").to_string(), "r.toml:1:1: model.attention: x");
  EXPECT_EQ(r.diagnostic("stage[0].batch_size", "x").to_string(), "--set 'stage.0.batch_size=12': stage[0].batch_size: x");
  EXPECT_EQ(r.diagnostic("sampler.steps", "x").to_string(), "r.toml: sampler.steps: x");  // no [sampler]
}

TEST(RecipeValidator, NamesThatBecomeFilesAreOneSafeName) {
  // A stage's name is its release's directory (released-NAME): "../../../escape3" wrote a DP release
  // outside the run directory, and "../../other-run/released-central" over another run's release.
  const std::string model = "[model]\ntype = \"fixture_model\"\n[data]\ndataset = \"fixture_data\"\n";
  const std::string stage = "[[stage]]\nmechanism = \"fixture_mechanism\"\nbatch_size = 10\n";
  const std::string rule = "expected a name of 1 to 64 ASCII letters, digits, '_', '.' or '-' that starts with a "
                           "letter or digit and holds no '..' (it names files and directories)";
  EXPECT_EQ(validation_errors(model + stage + "name = \"../../../escape3\"\n"),
            "r.toml:8:8: stage[0].name: " + rule + " for a stage's name (its release: released-NAME), got "
            "\"../../../escape3\"");
  EXPECT_EQ(validation_errors(model + stage, {"stage.0.name=\"../../other-run/released-central\""}),
            "--set 'stage.0.name=\"../../other-run/released-central\"': stage[0].name: " + rule +
                " for a stage's name (its release: released-NAME), got \"../../other-run/released-central\"");
  for (const std::string& bad : std::vector<std::string>{"/tmp/x", "a/b", ".hidden", "..", "a..b", "", "sp ace",
                                                         std::string(65, 'a')}) {
    const std::string errors = validation_errors(model + stage + "name = \"" + bad + "\"\n");
    EXPECT_NE(errors.find("stage[0].name: " + rule), std::string::npos) << bad << ": " << errors;
  }
  // [run] name is runs/NAME's; a [data.NAME] section names data a stage trains on.
  EXPECT_EQ(validation_errors("[run]\nname = \"../elsewhere\"\n"),
            "r.toml:2:8: run.name: " + rule + " for [run] name (runs/NAME), got \"../elsewhere\"");
  EXPECT_EQ(validation_errors("[data.\"../x\"]\ndataset = \"fixture_data\"\n"),
            "r.toml:1:7: data.../x: " + rule + " for a dataset's name ([data.NAME]), got \"../x\"");
  for (const std::string& good :
       std::vector<std::string>{"train", "dpdm-fmnist-eps0.2", "Stage_2", "9lives", std::string(64, 'a')}) {
    EXPECT_EQ(validation_errors(model + stage + "name = \"" + good + "\"\n[run]\nname = \"" + good + "\"\n"), "(valid)")
        << good;
  }
}

TEST(RecipeValidator, EvalCommandRefusesKeysItWouldIgnore) {
  // privdiff eval fixes the real data's split itself (--reference): real.split=train was accepted and
  // ignored, as were the [[eval]] keys that sample (samples, seed, ...).
  auto errors = [](const std::vector<std::string>& overrides) -> std::string {
    auto doc = RecipeDocument::parse("evaluators = []\n[real]\ndataset = \"fixture_data\"\n", "privdiff eval");
    if (auto problems = doc.apply_overrides(overrides); !problems.empty()) return RecipeError(problems).what();
    try {
      validate_evaluation(doc, fixture_registry());
    } catch (const RecipeError& e) {
      return e.what();
    }
    return "(valid)";
  };
  EXPECT_NE(errors({"real.split=train"}).find("--set 'real.split=train': real.split: privdiff eval does not use it: "
                                              "it reads the real data's test split, and its train split only with "
                                              "--reference train"),
            std::string::npos) << errors({"real.split=train"});
  EXPECT_NE(errors({"real.public=true"}).find("--set 'real.public=true': real.public: privdiff eval does not use it"),
            std::string::npos) << errors({"real.public=true"});
  EXPECT_EQ(errors({"reference=\"training\""}), "--set 'reference=\"training\"': reference: privdiff eval does not "
                                                "use this [[eval]] key: use --reference test or --reference train");
  EXPECT_EQ(errors({"samples=50"}), "--set 'samples=50': samples: privdiff eval does not use this [[eval]] key: the "
                                    "images are given (SAMPLES); --max-samples N scores fewer of them");
  EXPECT_EQ(errors({"epochs=2"}), "(valid)");  // used: every evaluator's epochs
}
