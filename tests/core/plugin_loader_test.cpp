#include "loader/component_registry.hpp"
#include "loader/plugin_loader.hpp"
#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"
#include "test_support.hpp"

#include <privdiff/plugin/descriptor.hpp>
#include <privdiff/plugin/fingerprint.hpp>

#include <gtest/gtest.h>

#include <fstream>

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

TEST(ComponentRegistry, RefusesADuplicateComponentIdWholePlugin) {
  ComponentRegistry registry;
  registry.add_directory(fixture_plugin_dir("good"));
  const LoadedPlugin& dup = registry.add_library(fixture_plugin("duplicate_id"));
  EXPECT_FALSE(dup.loaded);
  EXPECT_EQ(dup.refusal, "duplicate component id: accountant 'fixture_accountant' is already provided by " +
                             std::filesystem::canonical(fixture_plugin("good")).string());
  // The first provider keeps working.
  auto found = registry.find(sdk::ComponentKind::accountant, "fixture_accountant");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->plugin->plugin_id, "fixture_components");
  EXPECT_EQ(registry.plugins().size(), 2u);
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
  const LoadedPlugin& clash = registry.add_builtin("other", {entry("c"), entry("a")});
  EXPECT_FALSE(clash.loaded);
  EXPECT_EQ(clash.refusal, "duplicate component id: accountant 'a' is already provided by host");
  EXPECT_FALSE(registry.find(sdk::ComponentKind::accountant, "c"));  // refused whole
  EXPECT_EQ(registry.ids(sdk::ComponentKind::accountant), (std::vector<std::string>{"a", "b"}));
}
