// --set overrides: every value type, new keys and sections, list elements, and every error.
#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;

namespace {

const char* base_recipe = R"([model]
type = "fixture_model"

[[stage]]
mechanism = "fixture_mechanism"
batch_size = 64
)";

Recipe with(const std::vector<std::string>& overrides) {
  auto doc = RecipeDocument::parse(base_recipe, "r.toml");
  auto errors = doc.apply_overrides(overrides);
  return validate_recipe(doc, fixture_registry(), std::move(errors));
}

std::string errors_of(const std::vector<std::string>& overrides) {
  try {
    with(overrides);
    return "(valid)";
  } catch (const RecipeError& e) {
    return e.what();
  }
}

}  // namespace

TEST(RecipeOverrides, Integer) {
  EXPECT_EQ(with({"stage.0.steps=3"}).stages[0].mechanism.config.get_int("steps"), 3);
  EXPECT_EQ(with({"stage[0].steps=4"}).stages[0].mechanism.config.get_int("steps"), 4);
  EXPECT_EQ(with({"run.seed=7"}).run.get_int("seed"), 7);  // [run] created on the fly
}

TEST(RecipeOverrides, NumberAcceptsIntegersAndFloats) {
  EXPECT_DOUBLE_EQ(with({"model.dropout=0.25"}).model->config.get_double("dropout"), 0.25);
  EXPECT_DOUBLE_EQ(with({"model.dropout=1"}).model->config.get_double("dropout"), 1.0);
  EXPECT_DOUBLE_EQ(with({"stage.0.lr=1e-3"}).stages[0].mechanism.config.get_double("lr"), 1e-3);
}

TEST(RecipeOverrides, NumberOrKeyword) {
  EXPECT_TRUE(with({"stage.0.noise_multiplier=auto"}).stages[0].mechanism.config.is_keyword("noise_multiplier", "auto"));
  EXPECT_DOUBLE_EQ(with({"stage.0.noise_multiplier=1.5"}).stages[0].mechanism.config.get_double("noise_multiplier"),
                   1.5);
}

TEST(RecipeOverrides, Boolean) {
  EXPECT_FALSE(with({"model.attention=false"}).model->config.get_bool("attention"));
  EXPECT_FALSE(with({"stage.0.private=false"}).stages[0].mechanism.config.get_bool("private"));
}

TEST(RecipeOverrides, StringQuotedOrNot) {
  EXPECT_EQ(with({"model.preconditioning=vp"}).model->config.get_string("preconditioning"), "vp");
  EXPECT_EQ(with({"model.preconditioning=\"ve\""}).model->config.get_string("preconditioning"), "ve");
  // A string key keeps the text even when it also reads as another TOML type.
  EXPECT_EQ(with({"run.name=123"}).run.get_string("name"), "123");
  EXPECT_EQ(with({"run.name=true"}).run.get_string("name"), "true");
}

TEST(RecipeOverrides, Lists) {
  EXPECT_EQ(with({"model.channel_mult=[1,2,4,4]"}).model->config.get_int_list("channel_mult"),
            (std::vector<std::int64_t>{1, 2, 4, 4}));
  EXPECT_EQ(with({"model.channel_mult=[1,2,2]", "model.channel_mult.1=8"}).model->config.get_int_list("channel_mult"),
            (std::vector<std::int64_t>{1, 8, 2}));
  EXPECT_EQ(with({"model.sigma_range=[0.002, 80]"}).model->config.get_double_list("sigma_range"),
            (std::vector<double>{0.002, 80.0}));
  EXPECT_EQ(with({"model.roles=[\"attention\", \"lora\"]"}).model->config.get_string_list("roles"),
            (std::vector<std::string>{"attention", "lora"}));
}

TEST(RecipeOverrides, ComponentSelector) {
  EXPECT_EQ(errors_of({"model.type=fixture_modl"}),
            "--set 'model.type=fixture_modl': model.type: unknown model 'fixture_modl' (did you mean 'fixture_model'?); "
            "available models: fixture_model");
}

TEST(RecipeOverrides, LaterAssignmentsWin) {
  EXPECT_EQ(with({"stage.0.steps=3", "stage.0.steps=5"}).stages[0].mechanism.config.get_int("steps"), 5);
}

TEST(RecipeOverrides, TypeAndRangeErrorsAreReportedLikeTheFile) {
  EXPECT_EQ(errors_of({"stage.0.steps=abc"}),
            "--set 'stage.0.steps=abc': stage[0].steps: expected integer >= 0, got \"abc\"");
  EXPECT_EQ(errors_of({"model.dropout=2"}), "--set 'model.dropout=2': model.dropout: expected number in [0, 1], got 2");
  EXPECT_EQ(errors_of({"model.attention=yes"}),
            "--set 'model.attention=yes': model.attention: expected boolean, got \"yes\"");
  EXPECT_EQ(errors_of({"model.channel_mult=[1,0]"}),
            "--set 'model.channel_mult=[1,0]': model.channel_mult: expected list of integers >= 1, got [1, 0]");
  EXPECT_EQ(errors_of({"model.roles=attention"}),
            "--set 'model.roles=attention': model.roles: expected list of strings, got \"attention\"");
}

TEST(RecipeOverrides, UnknownKeysAndSectionsGetSuggestions) {
  EXPECT_EQ(errors_of({"model.chanels=3"}),
            "--set 'model.chanels=3': model.chanels: unknown key 'chanels' (did you mean 'channels'?)");
  EXPECT_EQ(errors_of({"sampelr.steps=3"}),
            "--set 'sampelr.steps=3': sampelr: unknown section 'sampelr' (did you mean 'sampler'?); recipe "
            "sections: run, privacy, data, plugins, model, adapter, stage, sampler, accountants, eval, sweep");
}

TEST(RecipeOverrides, PathErrors) {
  EXPECT_EQ(errors_of({"stage.3.steps=1"}), "--set 'stage.3.steps=1': stage: has 1 entry; index 3 is out of range");
  EXPECT_EQ(errors_of({"no_equals"}),
            "--set 'no_equals': expected KEY=VALUE with a dotted key path, e.g. stage.0.epochs=3");
  EXPECT_EQ(errors_of({"=3"}), "--set '=3': expected KEY=VALUE with a dotted key path, e.g. stage.0.epochs=3");
  EXPECT_EQ(errors_of({"model..x=3"}),
            "--set 'model..x=3': expected KEY=VALUE with a dotted key path, e.g. stage.0.epochs=3");
  EXPECT_EQ(errors_of({"model.type.x=1"}),
            "--set 'model.type.x=1': model.type: is a value, not a table; cannot set 'x' in it");
  EXPECT_EQ(errors_of({"model.channels.0=1"}),
            "--set 'model.channels.0=1': model.channels: does not exist; cannot index entry 0 of it");
  EXPECT_EQ(errors_of({"model.channel_mult.5=1"}),
            "--set 'model.channel_mult.5=1': model.channel_mult: does not exist; cannot index entry 5 of it");
}

TEST(RecipeOverrides, AllErrorsAtOnceWithFileErrorsFirst) {
  auto doc = RecipeDocument::parse("[model]\ntype = \"fixture_model\"\nchannels = 0\n", "r.toml");
  auto errors = doc.apply_overrides({"model.dropout=-1", "bad"});
  try {
    validate_recipe(doc, fixture_registry(), std::move(errors));
    FAIL();
  } catch (const RecipeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "r.toml:3:12: model.channels: expected integer >= 1, got 0\n"
              "--set 'model.dropout=-1': model.dropout: expected number in [0, 1], got -1\n"
              "--set 'bad': expected KEY=VALUE with a dotted key path, e.g. stage.0.epochs=3");
  }
}

namespace {

// What parsing `text` refuses it with ("" when it parses).
std::string parse_error_of(const std::string& text) {
  try {
    RecipeDocument::parse(text, "r.toml");
  } catch (const RecipeError& e) {
    return std::string(e.what());
  }
  return std::string();
}

}  // namespace

// Found by fuzz/recipe_fuzzer: Debian's toml++ 3.3 reaches __builtin_unreachable on some non-ASCII
// characters where it looks for whitespace (marzer/tomlplusplus#190, #295). TOML allows non-ASCII
// text only in strings and comments; anything else is refused before toml++ sees it.
TEST(RecipeText, NonAsciiOutsideStringsAndCommentsIsRefusedWithItsPosition) {
  EXPECT_EQ(parse_error_of("[run]\nname = \"caf\xc3\xa9\" # \xc2\xb5s\ns = '''\xc3\xa9\n\xc3\xa9'''\nt = \"\"\"\xc3\xa9\"\"\"\n"), "");
  const std::string micro = parse_error_of("[run]\nseed = 1\xc2\xb5\n");
  EXPECT_NE(micro.find("r.toml:2:9"), std::string::npos) << micro;
  EXPECT_NE(micro.find("non-ASCII character outside a string or comment"), std::string::npos) << micro;
  EXPECT_NE(parse_error_of("\xcc\xaa").find("r.toml:1:1"), std::string::npos);                      // toml++ #295
  EXPECT_NE(parse_error_of("s = \"\"\"\\\n\xc2\xa7\"\"\"\n").find("line-ending backslash"), std::string::npos);  // #190
  EXPECT_NE(parse_error_of("[run]\nname = \"a\xff\"\n").find("malformed UTF-8"), std::string::npos);
  EXPECT_EQ(parse_error_of("s = \"\"\"a\\\"\xc3\xa9\"\"\"\n"), "");  // an escaped quote, then text: still in the string
  // An invalid escape of a non-ASCII character is toml++'s to report (malformed TOML), not UTF-8.
  EXPECT_NE(parse_error_of("s = \"\\\xc3\xa9\"\n").find("malformed TOML"), std::string::npos);
}

// Found by fuzz/recipe_fuzzer: toml++ reads a quote inside a number-like token as part of the
// malformed number and reaches __builtin_unreachable on a non-ASCII character after it. Refused first;
// quotes that open strings (after =, [, {, a comma, a dot of a key, or a space) still do.
TEST(RecipeText, AQuoteInsideANumberOpensNoString) {
  for (const char* text : {"x=2'\xc6\xa2'", "x=[1,2'''\xc6\xa2", "x=[2\"\xc6\xa2\"]", "x=2.'\xc6\xa2'", "x=2:'\xc6\xa2'",
                           "x=0x1f'\xc6\xa2'", "x={a=-2'\xc6\xa2'}", "x=1979-05-27T07:32'\xc6\xa2'", "x=2='\xc6\xa2'",
                           "x=1['\xc6\xa2']", "x=1{\"\xc6\xa2\"}", "x=[\n2'\xc6\xa2']"}) {
    const std::string e = parse_error_of(text);
    EXPECT_NE(e.find("r.toml:"), std::string::npos) << text << ": " << e;
    EXPECT_NE(e.find("non-ASCII character outside a string or comment"), std::string::npos) << text << ": " << e;
  }
  EXPECT_EQ(parse_error_of("x = [1, '\xc6\xa2', \"\xc6\xa2\"]\ny = {a = '\xc6\xa2'}\na.'\xc6\xa2' = 1\n2024 = \"\xc6\xa2\"\n0=\"\xc6\xa2\"\n[t]\n1.\"\xc6\xa2\" = 2\n"), "");
}

TEST(RecipeText, ASetValueWithNonAsciiTextIsAString) {
  auto doc = RecipeDocument::parse(base_recipe, "r.toml");
  EXPECT_TRUE(doc.apply_overrides({"run.name=caf\xc3\xa9"}).empty());
  EXPECT_EQ(doc.root()["run"]["name"].value<std::string>(), std::string("caf\xc3\xa9"));
}

// Found by fuzz/recipe_fuzzer: an index with more digits than fit in 64 bits threw std::out_of_range
// out of apply_overrides; it is an index out of range like any other.
TEST(RecipeText, AHugeListIndexIsOutOfRange) {
  const std::string e = errors_of({"stage.99999999999999999999999.batch_size=1"});
  EXPECT_NE(e.find("is out of range"), std::string::npos) << e;
}
