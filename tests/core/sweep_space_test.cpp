// privdiff sweep's search space: the --param specs, their refusals, and the draws (a list uniformly,
// a log-range log-uniformly within its bounds, rounded for :int), reproducible from the seed.
#include "selection/sweep_space.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace privdiff::core;

TEST(SweepSpace, ParsesListsAndLogRanges) {
  const auto list = parse_sweep_parameter("stage.2.lr=1e-4,3e-4,1e-3");
  EXPECT_EQ(list.key, "stage.2.lr");
  EXPECT_EQ(list.values, (std::vector<std::string>{"1e-4", "3e-4", "1e-3"}));
  const auto range = parse_sweep_parameter("stage.2.steps=log:80:320:int");
  EXPECT_TRUE(range.values.empty());
  EXPECT_EQ(range.low, 80);
  EXPECT_EQ(range.high, 320);
  EXPECT_TRUE(range.integer);
  for (const char* bad : {"stage.lr", "=1", "stage.lr=", "stage.lr=1,,2", "k=log:1", "k=log:5:2", "k=log:0:2", "k=log:1:2:float"}) {
    EXPECT_THROW(parse_sweep_parameter(bad), std::invalid_argument) << bad;
  }
}

TEST(SweepSpace, DrawsWithinTheSpaceReproducibly) {
  const auto range = parse_sweep_parameter("k=log:10:1000:int");
  const auto list = parse_sweep_parameter("k=a,b");
  std::mt19937_64 rng(7), again(7);
  std::map<std::string, int> seen;
  double log_sum = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string v = draw_sweep_value(range, rng);
    EXPECT_EQ(v, draw_sweep_value(range, again));
    const double x = std::stod(v);
    EXPECT_GE(x, 10);
    EXPECT_LE(x, 1000);
    EXPECT_EQ(x, std::round(x));
    log_sum += std::log10(x);
    ++seen[draw_sweep_value(list, rng)];
    draw_sweep_value(list, again);
  }
  EXPECT_NEAR(log_sum / 2000, 2.0, 0.05);  // log-uniform: the mean of log10 is the middle
  EXPECT_NEAR(seen["a"], 1000, 100);
  EXPECT_NEAR(seen["b"], 1000, 100);
}
