#include <privdiff/config/config.hpp>

#include <gtest/gtest.h>

using namespace privdiff::sdk;

TEST(Config, TypedAccessors) {
  Config c("stage[0]", {{"k", ConfigValue{std::int64_t{32}}},
                        {"lr", ConfigValue{3e-4}},
                        {"name", ConfigValue{std::string("x")}},
                        {"on", ConfigValue{true}},
                        {"sigma", ConfigValue{std::string("auto")}},
                        {"mult", ConfigValue{std::vector<std::int64_t>{1, 2}}}});
  EXPECT_EQ(c.get_int("k"), 32);
  EXPECT_DOUBLE_EQ(c.get_double("k"), 32.0);  // integers read as numbers
  EXPECT_DOUBLE_EQ(c.get_double("lr"), 3e-4);
  EXPECT_EQ(c.get_string("name"), "x");
  EXPECT_TRUE(c.get_bool("on"));
  EXPECT_TRUE(c.is_keyword("sigma", "auto"));
  EXPECT_FALSE(c.is_keyword("lr", "auto"));
  EXPECT_EQ(c.get_int_list("mult"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(c.has("k"));
  EXPECT_FALSE(c.has("missing"));
}

TEST(Config, MisuseIsAComponentBugWithThePath) {
  Config c("stage[1]", {{"k", ConfigValue{std::int64_t{32}}}});
  try {
    c.get_string("k");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "stage[1].k: read as string but holds 32");
  }
  EXPECT_THROW(c.get_int("nope"), ConfigError);
}
