#include "recipe/suggest.hpp"

#include <gtest/gtest.h>

using namespace privdiff::core;

TEST(Suggest, EditDistance) {
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("chanels", "channels"), 1u);
  EXPECT_EQ(edit_distance("smapler", "sampler"), 1u);  // transposition
}

TEST(Suggest, SuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> keys = {"noise_multiplicity", "noise_multiplier", "batch_size", "lr"};
  EXPECT_EQ(closest_match("noise_multiplicty", keys), "noise_multiplicity");
  EXPECT_EQ(closest_match("batchsize", keys), "batch_size");
  EXPECT_EQ(closest_match("frobnicate", keys), "");
  EXPECT_EQ(closest_match("x", keys), "");
  EXPECT_EQ(did_you_mean("lrr", keys), " (did you mean 'lr'?)");
  EXPECT_EQ(join({"a", "b"}), "a, b");
  EXPECT_EQ(join({}), "none");
}
