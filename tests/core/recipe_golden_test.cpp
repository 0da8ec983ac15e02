// Golden tests: each tests/fixtures/recipes/invalid/NAME.toml must fail validation with exactly
// the text in NAME.expected (every error, in order); each valid/*.toml must validate.
#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"
#include "util/atomic_file.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace privdiff::core;
using namespace privdiff::core::testing;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> recipes_in(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fixture_path("recipes/" + dir))) {
    if (e.path().extension() == ".toml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string validation_errors(const fs::path& recipe) {
  try {
    const auto doc = RecipeDocument::parse(read_file(recipe), recipe.filename().string());
    validate_recipe(doc, fixture_registry());
    return "(valid)";
  } catch (const RecipeError& e) {
    return e.what();
  }
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

TEST(RecipeGolden, EveryInvalidRecipeGivesItsExpectedErrors) {
  const auto recipes = recipes_in("invalid");
  ASSERT_GE(recipes.size(), 6u);
  for (const auto& recipe : recipes) {
    fs::path expected = recipe;
    expected.replace_extension(".expected");
    ASSERT_TRUE(fs::exists(expected)) << "missing " << expected;
    EXPECT_EQ(validation_errors(recipe), trim(read_file(expected))) << "for " << recipe.filename();
  }
}

TEST(RecipeGolden, EveryValidRecipeValidates) {
  for (const auto& recipe : recipes_in("valid")) {
    EXPECT_EQ(validation_errors(recipe), "(valid)") << "for " << recipe.filename();
  }
}
