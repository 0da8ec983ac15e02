#include "loader/component_registry.hpp"
#include "loader/plugin_loader.hpp"
#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"
#include "run/recipe_loading.hpp"
#include "test_support.hpp"
#include "util/usage_error.hpp"

#include <privdiff/plugin/descriptor.hpp>
#include <privdiff/plugin/fingerprint.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <unistd.h>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;

TEST(PluginLoader, LoadsAGoodPluginWithItsDescriptorAndComponents) {
  const LoadedPlugin p = load_plugin(fixture_plugin("good"));
  ASSERT_TRUE(p.loaded) << p.refusal;
  EXPECT_EQ(p.plugin_id, "fixture_components");
  EXPECT_EQ(p.version, "1.2.3");
  EXPECT_EQ(p.description, "Test fixture: one component of each kind");
  ASSERT_EQ(p.components.size(), 6u);  // one of each kind, and a second accountant (an approximation)
  EXPECT_EQ(p.components[0].id, "fixture_model");
  EXPECT_EQ(p.components[0].kind, sdk::ComponentKind::model);
  EXPECT_TRUE(p.path.is_absolute());
}

TEST(PluginLoader, RefusesAWrongAbiVersion) {
  const LoadedPlugin p = load_plugin(fixture_plugin("wrong_abi"));
  EXPECT_FALSE(p.loaded);
  EXPECT_EQ(p.refusal, "plugin ABI version " + std::to_string(sdk::plugin_abi_version + 1) +
                           ", this privdiff expects " + std::to_string(sdk::plugin_abi_version) +
                           " (rebuild the plugin against this SDK)");
  EXPECT_TRUE(p.components.empty());
}

TEST(PluginLoader, RefusesAWrongDescriptorSize) {
  const LoadedPlugin p = load_plugin(fixture_plugin("wrong_size"));
  EXPECT_FALSE(p.loaded);
  const auto size = sizeof(sdk::PluginDescriptor);
  EXPECT_EQ(p.refusal, "plugin descriptor is " + std::to_string(size + 8) + " bytes, this privdiff expects " +
                           std::to_string(size) + " (rebuild the plugin against this SDK)");
}

TEST(PluginLoader, RefusesAWrongBuildFingerprintNamingWhatDiffers) {
  const LoadedPlugin p = load_plugin(fixture_plugin("wrong_fingerprint"));
  EXPECT_FALSE(p.loaded);
  // The fixture claims torch=2.1, flavour=cuda; name exactly the fields that differ from this build.
  std::string expected = "build fingerprint mismatch: ";
  const std::string torch = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  std::string diffs;
  if (torch != "2.1") diffs += "torch=2.1 (this privdiff: torch=" + torch + ")";
  if (std::string(PRIVDIFF_TORCH_FLAVOUR) != "cuda") {
    diffs += std::string(diffs.empty() ? "" : ", ") + "flavour=cuda (this privdiff: flavour=" +
             PRIVDIFF_TORCH_FLAVOUR + ")";
  }
  EXPECT_EQ(p.refusal, expected + diffs + " (rebuild the plugin against this SDK)");
}

TEST(PluginLoader, RefusesALibraryWithoutDescriptor) {
  const LoadedPlugin p = load_plugin(fixture_plugin("no_descriptor"));
  EXPECT_FALSE(p.loaded);
  EXPECT_EQ(p.refusal,
            "no plugin descriptor (symbol 'privdiff_plugin' not exported; define one with PRIVDIFF_PLUGIN(...))");
}

TEST(PluginLoader, RefusesAThrowingRegistration) {
  const LoadedPlugin p = load_plugin(fixture_plugin("throwing_registration"));
  EXPECT_FALSE(p.loaded);
  EXPECT_EQ(p.refusal, "registration failed: fixture registration exploded");
  EXPECT_EQ(p.plugin_id, "throwing_registration");
}

TEST(PluginLoader, RefusesAFileThatIsNotALibrary) {
  const auto path = std::filesystem::temp_directory_path() / "libprivdiff_not_elf.so";
  std::ofstream(path) << "not an ELF file";
  const LoadedPlugin p = load_plugin(path);
  EXPECT_FALSE(p.loaded);
  EXPECT_EQ(p.refusal.rfind("cannot be loaded: ", 0), 0u) << p.refusal;
  EXPECT_NE(p.refusal.find("libprivdiff_not_elf.so"), std::string::npos) << p.refusal;
  std::filesystem::remove(path);
  EXPECT_EQ(load_plugin("/nonexistent/libx.so").refusal, "not a file");
}

// No library shadows another's id (issue 67): the id two libraries register is ambiguous — every use
// is refused naming both — until one of them is chosen ([plugins] use); the rest of each stays usable.
TEST(ComponentRegistry, AnIdTwoLibrariesRegisterIsAmbiguousUntilOneIsChosen) {
  ComponentRegistry registry;
  registry.add_directory(fixture_plugin_dir("good"));
  const LoadedPlugin& dup = registry.add_library(fixture_plugin("duplicate_id"));
  const std::string good = std::filesystem::canonical(fixture_plugin("good")).string();
  const std::string other = std::filesystem::canonical(fixture_plugin("duplicate_id")).string();
  EXPECT_TRUE(dup.loaded) << dup.refusal;
  EXPECT_FALSE(registry.find(sdk::ComponentKind::accountant, "fixture_accountant"));
  EXPECT_TRUE(registry.find(sdk::ComponentKind::model, "fixture_model"));  // the rest of each library works
  EXPECT_EQ(registry.ids(sdk::ComponentKind::accountant), std::vector<std::string>{"fixture_approximate_accountant"});
  const std::string ambiguity = "accountant 'fixture_accountant' is provided by 2 libraries, " + good + " and " + other +
                                ": name the one to use in the recipe's [plugins] use = [\"PATH/TO/LIBRARY.so\"] "
                                "(docs/writing-a-plugin.md#two-libraries-with-one-id), or remove the other from the "
                                "plugin path";
  EXPECT_EQ(registry.ambiguity(sdk::ComponentKind::accountant, "fixture_accountant"), ambiguity);
  EXPECT_EQ(registry.duplicate_notices(), std::vector<std::string>{"warning: " + ambiguity});
  try {
    registry.create(sdk::ComponentKind::accountant, "fixture_accountant", sdk::Config{});
    FAIL() << "built an ambiguous component";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), ambiguity);
  }
  const auto doc = RecipeDocument::parse("[privacy]\naccountant = \"fixture_accountant\"\n", "r.toml");
  try {
    validate_recipe(doc, registry);
    FAIL() << "a recipe used an ambiguous id";
  } catch (const RecipeError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics()[0].to_string(), "r.toml:2:14: privacy.accountant: " + ambiguity);
  }

  // Chosen, the library is used for its ids; the other's is said to be unused.
  EXPECT_EQ(&registry.choose_library(fixture_plugin("duplicate_id")), &dup);
  auto found = registry.find(sdk::ComponentKind::accountant, "fixture_accountant");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->plugin, &dup);
  EXPECT_EQ(registry.ambiguity(sdk::ComponentKind::accountant, "fixture_accountant"), "");
  EXPECT_EQ(registry.duplicate_notices(),
            std::vector<std::string>{"plugins: accountant 'fixture_accountant' of " + good +
                                     " is not used: the recipe's [plugins] use names " + other});
  EXPECT_EQ(registry.plugins().size(), 2u);
}

// Two copies of one library (the same bytes) are the same code: the first found is used, and the other
// is said to be unused. One byte more and they are two libraries: the ids become ambiguous.
TEST(ComponentRegistry, ACopyOfALibraryIsUsedOnceAndAChangedCopyIsAnother) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("privdiff-copies-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fixture_plugin("good"), dir / "libsame.so", fs::copy_options::overwrite_existing);
  fs::copy_file(fixture_plugin("good"), dir / "libchanged.so", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "libchanged.so", std::ios::app | std::ios::binary) << '\0';
  const std::string good = fs::canonical(fixture_plugin("good")).string();
  {
    ComponentRegistry registry;
    registry.add_library(fixture_plugin("good"));
    registry.add_library(dir / "libsame.so");
    auto found = registry.find(sdk::ComponentKind::sampler, "fixture_sampler");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->plugin->path.string(), good);
    const auto notices = registry.duplicate_notices();
    EXPECT_EQ(notices.size(), 6u);  // one line for each of its components
    EXPECT_NE(std::find(notices.begin(), notices.end(),
                        "plugins: sampler 'fixture_sampler' of " + (dir / "libsame.so").string() + " is not used: " +
                            good + " (the same bytes) was found first"),
              notices.end())
        << notices.front();
    EXPECT_EQ(registry.library_sha256(*found->plugin), registry.library_sha256(*registry.plugins()[1]));
  }
  {
    ComponentRegistry registry;
    registry.add_library(fixture_plugin("good"));
    registry.add_library(dir / "libchanged.so");
    EXPECT_FALSE(registry.find(sdk::ComponentKind::sampler, "fixture_sampler"));
    EXPECT_NE(registry.ambiguity(sdk::ComponentKind::sampler, "fixture_sampler").find(dir.string() + "/libchanged.so"),
              std::string::npos);
  }
  fs::remove_all(dir);
}

TEST(ComponentRegistry, LoadsEachLibraryOnceAndIgnoresMissingDirectories) {
  ComponentRegistry registry;
  registry.add_directory(fixture_plugin_dir("good"));
  registry.add_directory(fixture_plugin_dir("good"));
  registry.add_library(fixture_plugin("good"));
  registry.add_directory("/nonexistent/plugins");
  EXPECT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.ids(sdk::ComponentKind::sampler), std::vector<std::string>{"fixture_sampler"});
}

TEST(ComponentRegistry, ARecipeNeedingARefusedPluginFailsWithTheReason) {
  ComponentRegistry registry;
  registry.add_directory(fixture_plugin_dir("wrong_abi"));
  const auto doc = RecipeDocument::parse("[privacy]\naccountant = \"wrong_abi\"\n", "r.toml");
  try {
    validate_recipe(doc, registry);
    FAIL();
  } catch (const RecipeError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics()[0].to_string(),
              "r.toml:2:14: privacy.accountant: unknown accountant 'wrong_abi'; available accountants: none; "
              "refused plugins that might provide it: " +
                  std::filesystem::canonical(fixture_plugin("wrong_abi")).string() +
                  ": plugin ABI version " + std::to_string(sdk::plugin_abi_version + 1) + ", this privdiff expects " +
                      std::to_string(sdk::plugin_abi_version) + " (rebuild the plugin against this SDK)");
  }
}

TEST(ComponentRegistry, NamesTheRefusedPluginWhoseIdMatches) {
  ComponentRegistry registry;
  registry.add_directory(fixture_plugin_dir("throwing_registration"));
  EXPECT_EQ(registry.refused_hint("throwing_registration"),
            "plugin " + std::filesystem::canonical(fixture_plugin("throwing_registration")).string() +
                " would provide it but was refused: registration failed: fixture registration exploded");
  try {
    registry.create(sdk::ComponentKind::accountant, "throwing_registration", sdk::Config{});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no accountant 'throwing_registration' is loaded; plugin ", 0), 0u) << e.what();
  }
}

TEST(ComponentRegistry, ConstructionErrorsNameTheComponentAndPlugin) {
  const auto& registry = fixture_registry();
  sdk::Config config("stage[0]", {{"private", sdk::ConfigValue{true}},
                                  {"steps", sdk::ConfigValue{std::int64_t{1}}},
                                  {"batch_size", sdk::ConfigValue{std::int64_t{1}}},
                                  {"noise_multiplier", sdk::ConfigValue{std::string("auto")}},
                                  {"fail_in_construction", sdk::ConfigValue{true}}});
  try {
    registry.create(sdk::ComponentKind::mechanism, "fixture_mechanism", config);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "while constructing mechanism 'fixture_mechanism' from " +
                                         std::filesystem::canonical(fixture_plugin("good")).string() +
                                         ": fixture asked to fail");
  }
}

TEST(ComponentRegistry, BuiltinComponentsAreFoundAndFollowTheDuplicateRule) {
  ComponentRegistry registry;
  auto entry = [](const char* id) {
    return sdk::ComponentRegistration{sdk::ComponentKind::accountant, id, "built in", sdk::Schema{}, nullptr};
  };
  const LoadedPlugin& first = registry.add_builtin("host", {entry("a"), entry("b")});
  EXPECT_TRUE(first.loaded);
  ASSERT_TRUE(registry.find(sdk::ComponentKind::accountant, "b"));
  EXPECT_EQ(registry.find(sdk::ComponentKind::accountant, "b")->plugin->path, "host");
  EXPECT_EQ(registry.library_sha256(first), "");  // no file
  const LoadedPlugin& clash = registry.add_builtin("other", {entry("c"), entry("a")});
  EXPECT_TRUE(clash.loaded);
  EXPECT_TRUE(registry.find(sdk::ComponentKind::accountant, "c"));
  EXPECT_FALSE(registry.find(sdk::ComponentKind::accountant, "a"));  // ambiguous: neither shadows the other
  EXPECT_EQ(registry.ambiguity(sdk::ComponentKind::accountant, "a").rfind("accountant 'a' is provided by 2 libraries, "
                                                                        "host and other: ", 0), 0u);
  EXPECT_EQ(registry.ids(sdk::ComponentKind::accountant), (std::vector<std::string>{"b", "c"}));
}

// A recipe's [plugins] use loads and chooses its libraries; each library not used for an id is said on
// stderr, once.
TEST(ComponentRegistry, ARecipesPluginsUseChoosesTheLibraryAndSaysWhichIsNot) {
  const auto dir = std::filesystem::temp_directory_path() / ("privdiff-use-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "r.toml") << "[plugins]\nsearch = [\"" << fixture_plugin_dir("good").string() << "\"]\nuse = [\""
                                << fixture_plugin("duplicate_id").string() << "\"]\n[privacy]\naccountant = "
                                << "\"fixture_accountant\"\n";
  ComponentRegistry registry;
  ::testing::internal::CaptureStderr();
  const Recipe recipe = load_recipe((dir / "r.toml").string(), {}, {}, registry);
  const std::string said = ::testing::internal::GetCapturedStderr();
  const std::string other = std::filesystem::canonical(fixture_plugin("duplicate_id")).string();
  EXPECT_EQ(registry.find(sdk::ComponentKind::accountant, "fixture_accountant")->plugin->path.string(), other);
  EXPECT_NE(said.find("plugins: accountant 'fixture_accountant' of " +
                      std::filesystem::canonical(fixture_plugin("good")).string() +
                      " is not used: the recipe's [plugins] use names " + other + "\n"),
            std::string::npos)
      << said;
  ASSERT_EQ(recipe.plugin_use.size(), 1u);
  EXPECT_NE(recipe.to_toml().find("use = [\"" + fixture_plugin("duplicate_id").string() + "\"]"), std::string::npos);
  // A library that cannot be used is refused by name.
  std::ofstream(dir / "bad.toml") << "[plugins]\nuse = [\"libnothing.so\"]\n";
  ComponentRegistry other_registry;
  try {
    load_recipe((dir / "bad.toml").string(), {}, {}, other_registry);
    FAIL() << "a missing [plugins] use library was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "bad.toml").string() + ": [plugins] use: " + (dir / "libnothing.so").string() +
                                         ": not a file");
  }
  std::filesystem::remove_all(dir);
}
