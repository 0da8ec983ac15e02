#include <privdiff/config/schema.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk;

TEST(Schema, ExpectationTextNamesTypeBoundsChoicesAndKeywords) {
  EXPECT_EQ(Key::integer("k").at_least(1).expectation(), "integer >= 1");
  EXPECT_EQ(Key::number("q").greater_than(0).less_than(1).expectation(), "number in (0, 1)");
  EXPECT_EQ(Key::number("d").at_least(0).at_most(0.5).expectation(), "number in [0, 0.5]");
  EXPECT_EQ(Key::number("s").greater_than(0).or_keyword("auto").expectation(), "number > 0 or \"auto\"");
  EXPECT_EQ(Key::string("p").one_of({"edm", "vp"}).expectation(), "one of \"edm\", \"vp\"");
  EXPECT_EQ(Key::integer_list("m").at_least(1).expectation(), "list of integers >= 1");
  EXPECT_EQ(Key::boolean("b").expectation(), "boolean");
  // Whole bounds in full: "at most 1000000000", never "1e+09".
  EXPECT_EQ(Key::integer("steps").at_least(1).at_most(1e9).expectation(), "integer in [1, 1000000000]");
  EXPECT_EQ(Key::number("e").greater_than(0).at_most(1e6).expectation(), "number in (0, 1000000]");
  EXPECT_EQ(Key::number("t").at_least(-2.5).at_most(1e20).expectation(), "number in [-2.5, 1e+20]");
}

TEST(Schema, AcceptsChecksTypeAndRange) {
  const Key k = Key::integer("k").at_least(1).at_most(10);
  EXPECT_TRUE(k.accepts(ConfigValue{std::int64_t{1}}));
  EXPECT_TRUE(k.accepts(ConfigValue{std::int64_t{10}}));
  EXPECT_FALSE(k.accepts(ConfigValue{std::int64_t{0}}));
  EXPECT_FALSE(k.accepts(ConfigValue{std::int64_t{11}}));
  EXPECT_FALSE(k.accepts(ConfigValue{1.0}));
  EXPECT_FALSE(k.accepts(ConfigValue{std::string("1")}));

  const Key open = Key::number("q").greater_than(0).less_than(1);
  EXPECT_FALSE(open.accepts(ConfigValue{0.0}));
  EXPECT_FALSE(open.accepts(ConfigValue{1.0}));
  EXPECT_TRUE(open.accepts(ConfigValue{0.5}));

  const Key s = Key::number("s").greater_than(0).or_keyword("auto");
  EXPECT_TRUE(s.accepts(ConfigValue{std::string("auto")}));
  EXPECT_FALSE(s.accepts(ConfigValue{std::string("automatic")}));

  const Key list = Key::integer_list("m").at_least(1);
  EXPECT_TRUE(list.accepts(ConfigValue{std::vector<std::int64_t>{1, 2}}));
  EXPECT_FALSE(list.accepts(ConfigValue{std::vector<std::int64_t>{1, 0}}));
  EXPECT_TRUE(list.accepts(ConfigValue{std::vector<std::int64_t>{}}));

  const Key choices = Key::string_list("r").one_of({"attention", "lora"});
  EXPECT_TRUE(choices.accepts(ConfigValue{std::vector<std::string>{"lora"}}));
  EXPECT_FALSE(choices.accepts(ConfigValue{std::vector<std::string>{"lora", "bias"}}));
}

TEST(Schema, NanIsNeverInRange) {
  EXPECT_FALSE(Key::number("x").at_least(0).accepts(ConfigValue{std::nan("")}));
}

TEST(Schema, RequiredOptionalAndDefaults) {
  EXPECT_TRUE(Key::integer("a").is_required());
  EXPECT_FALSE(Key::integer("a").optional().is_required());
  EXPECT_FALSE(Key::integer("a").defaults(3).is_required());
  // An integer default of a number key is widened.
  const Key n = Key::number("lr").defaults(1);
  EXPECT_TRUE(std::holds_alternative<double>(*n.default_value()));
}

TEST(Schema, RejectsSchemaBugsAtRegistration) {
  EXPECT_THROW(Schema{}.add(Key::integer("a")).add(Key::integer("a")), std::invalid_argument);
  EXPECT_THROW(Schema{}.add(Key::integer("k").at_least(1).defaults(0)), std::invalid_argument);
  EXPECT_THROW(Schema{}.add(Key::integer("k").one_of({"x"})), std::invalid_argument);
  EXPECT_THROW(Schema{}.add(Key::string("k").or_keyword("auto")), std::invalid_argument);
  EXPECT_THROW(Schema{}.add(Key::string("k").at_least(1)), std::invalid_argument);
  EXPECT_THROW(Schema{}.add(Key::string("k").one_of({"a", "b"}).defaults("c")), std::invalid_argument);
}

TEST(ConfigValueText, RendersAsToml) {
  EXPECT_EQ(to_toml(ConfigValue{std::int64_t{3}}), "3");
  EXPECT_EQ(to_toml(ConfigValue{0.1}), "0.1");
  EXPECT_EQ(to_toml(ConfigValue{2.0}), "2.0");
  EXPECT_EQ(to_toml(ConfigValue{1e-5}), "1e-05");
  EXPECT_EQ(to_toml(ConfigValue{std::string("a\"b")}), "\"a\\\"b\"");
  EXPECT_EQ(to_toml(ConfigValue{std::vector<std::int64_t>{1, 2, 2}}), "[1, 2, 2]");
  EXPECT_EQ(to_toml(ConfigValue{std::vector<std::string>{"rdp", "prv"}}), "[\"rdp\", \"prv\"]");
  EXPECT_EQ(to_toml(ConfigValue{true}), "true");
  EXPECT_EQ(to_toml(ConfigValue{1e-310}), "1e-310");  // a subnormal: std::stod would have thrown
  EXPECT_EQ(shortest_number_text(0.001), "0.001");
  EXPECT_EQ(shortest_number_text(2.0), "2");
}

// A derived component re-documents or drops a key it inherits (issue 51: automatic clipping's
// max_grad_norm is R, not a clipping norm).
TEST(Schema, InheritedKeysCanBeRedocumentedOrRemoved) {
  Schema s;
  s.add(Key::number("max_grad_norm").defaults(1.0).doc("per-example clipping norm C"))
      .add(Key::string("clipping").defaults("flat"));
  s.document("max_grad_norm", "R: each gradient scaled to a norm just under R").remove("clipping");
  ASSERT_NE(s.find("max_grad_norm"), nullptr);
  EXPECT_EQ(s.find("max_grad_norm")->doc_text(), "R: each gradient scaled to a norm just under R");
  EXPECT_EQ(s.find("clipping"), nullptr);
  EXPECT_EQ(s.keys().size(), 1u);
  EXPECT_THROW(s.document("nope", "x"), std::invalid_argument);
  EXPECT_THROW(s.remove("clipping"), std::invalid_argument);
}
