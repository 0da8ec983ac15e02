// The record-replay audit (sdk check/statistic_replay.hpp) of the installed mechanism plugins that
// release noisy statistics instead of DP-SGD updates, as a recipe builds them: semantic_query (its
// label histogram, sensitivity sqrt(top_k)) and private_evolution (each iteration's vote histogram,
// sensitivity sqrt(votes_per_record)), on 8x8 stand-in images in 3 classes, with public stand-in data
// in 4 classes. Each x changes the first (non-adaptive) histogram by exactly its declared sensitivity:
// x adds top_k labels, or votes_per_record votes, in distinct entries of its class.
#include "installed_plugins.hpp"

#include <privdiff/check/statistic_replay.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>

using namespace privdiff;
using namespace privdiff::sdk::check;
using sdk::ConfigValue;

namespace {

constexpr std::int64_t classes = 3;
const ImageShape shape{1, 8, 8};
using Values = std::map<std::string, ConfigValue>;

class PublicStandIn : public ReplayData {
 public:
  PublicStandIn()
      : ReplayData(random_images(40, 11, shape).to(at::kFloat), at::arange(40, at::kLong).remainder(4), 4) {}
  bool is_public() const override { return true; }
  std::string name() const override { return "public stand-in"; }
};

StatisticMechanism installed(const std::string& id, Values values) {
  return [id, values](std::uint64_t noise_seed) {
    Values v = values;
    v["secure_noise"] = ConfigValue{false};
    v["seed"] = ConfigValue{static_cast<std::int64_t>(noise_seed)};
    return privdiff::testing::make_installed<sdk::Mechanism>(id, v);
  };
}

Values classifier_values() {
  return {{"public_data", ConfigValue{std::string("public")}},
          {"classifier_epochs", ConfigValue{std::int64_t{1}}},
          {"classifier_batch_size", ConfigValue{std::int64_t{16}}}};
}

// Extreme, blank and typical records, in every class.
std::vector<Neighbour> neighbours() {
  std::vector<Neighbour> xs = adversarial_neighbours(1.0, 2, shape);  // a dataset's images are in [-1, 1]
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i].label = static_cast<std::int64_t>(i) % classes;
  return xs;
}

void expect_exact_sensitivity(const std::string& name, const Report& r) {
  std::cout << name << ":\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  std::size_t compared = 0;
  for (const auto& m : r.measurements) {
    if (m.name.rfind("x = ", 0) != 0) continue;
    ++compared;
    EXPECT_NEAR(m.distance / m.bound, 1.0, 1e-6) << m.name;
  }
  EXPECT_EQ(compared, neighbours().size());
}

}  // namespace

TEST(RecordReplayStatistics, SemanticQueryHistogram) {
  const PublicStandIn pub;
  const ReplayData d = ReplayData::in_classes(random_images(23, 3, shape).to(at::kFloat), classes);
  ReplayModel unused(at::kFloat, 0);
  Values values = classifier_values();
  values["top_k"] = ConfigValue{std::int64_t{2}};
  values["select"] = ConfigValue{std::int64_t{2}};
  values["noise_multiplier"] = ConfigValue{0.5};
  values["images_per_class"] = ConfigValue{std::int64_t{5}};
  const auto stage = statistic_stage(installed("semantic_query", values), unused, &pub, classes, 3);
  expect_exact_sensitivity("semantic_query plugin", check_statistic_releases(stage, d, neighbours()));
}

namespace {
Report private_evolution_replay(const std::string& embedding) {
  const PublicStandIn pub;
  const ReplayData d = ReplayData::in_classes(random_images(23, 3, shape).to(at::kFloat), classes);
  at::manual_seed(1);
  auto generator = privdiff::testing::make_installed<sdk::Model>(
      "pixel_unet", {{"channels", ConfigValue{std::int64_t{8}}},
                     {"channel_mult", ConfigValue{std::vector<std::int64_t>{1, 2}}},
                     {"num_res_blocks", ConfigValue{std::int64_t{1}}},
                     {"attention_resolutions", ConfigValue{std::vector<std::int64_t>{}}},
                     {"image_size", ConfigValue{std::int64_t{8}}},
                     {"num_classes", ConfigValue{classes}}});
  Values values = classifier_values();
  values["embedding"] = ConfigValue{embedding};
  values["iterations"] = ConfigValue{std::int64_t{2}};  // the second is adaptive: structure only
  values["samples_per_class"] = ConfigValue{std::int64_t{4}};
  values["votes_per_record"] = ConfigValue{std::int64_t{2}};
  values["noise_multiplier"] = ConfigValue{0.5};
  values["threshold"] = ConfigValue{0.5};
  values["sampler_steps"] = ConfigValue{std::int64_t{2}};
  const auto stage = statistic_stage(installed("private_evolution", values), *generator, &pub, classes, 3);
  return check_statistic_releases(stage, d, neighbours());
}
}  // namespace

TEST(RecordReplayStatistics, PrivateEvolutionVotes) {
  expect_exact_sensitivity("private_evolution plugin", private_evolution_replay("classifier"));
}

TEST(RecordReplayStatistics, PrivateEvolutionVotesInPixels) {
  // The embedding changes where a record votes, never how many votes it casts.
  expect_exact_sensitivity("private_evolution plugin, pixel embedding", private_evolution_replay("pixels"));
}

namespace {
// central_images on the stand-in records, downsampled to 4x4 (d = 16): each query reports its noisy
// statistic before division (mean) or argmax (mode), with sensitivity sqrt(d).
Report central_images_replay(const std::string& statistic, double sampling_rate) {
  const ReplayData d = ReplayData::in_classes(random_images(23, 3, shape).to(at::kFloat), classes);
  ReplayModel unused(at::kFloat, 0);
  const Values values{{"statistic", ConfigValue{statistic}},
                      {"queries", ConfigValue{std::int64_t{3}}},
                      {"sampling_rate", ConfigValue{sampling_rate}},
                      {"noise_multiplier", ConfigValue{2.0}},
                      {"resolution", ConfigValue{std::int64_t{4}}}};
  const auto stage = statistic_stage(installed("central_images", values), unused, nullptr, classes, 3);
  return check_statistic_releases(stage, d, neighbours());
}

// The measurements of x's part, by name ("x = ..., noisy class sums, query 1"): (distance, bound).
std::map<std::string, std::pair<double, double>> compared(const Report& r) {
  std::map<std::string, std::pair<double, double>> out;
  for (const auto& m : r.measurements) {
    if (m.name.rfind("x = ", 0) == 0) out[m.name] = {m.distance, m.bound};
  }
  return out;
}
}  // namespace

TEST(RecordReplayStatistics, CentralImagesMeanSums) {
  // Every record sampled (q_c = 1), so every query is compared: x's part is its downsampled image in
  // [0, 1], whose L2 norm reaches sqrt(d) for the all-white extreme and stays below it for the others.
  const Report r = central_images_replay("mean", 1.0);
  std::cout << "central_images (mean):\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  const auto parts = compared(r);
  ASSERT_EQ(parts.size(), 3 * neighbours().size());  // 3 queries
  double largest = 0;
  for (const auto& [name, m] : parts) {
    EXPECT_EQ(m.second, 4.0) << name;  // sqrt(1 x 4 x 4)
    largest = std::max(largest, m.first / m.second);
  }
  EXPECT_NEAR(largest, 1.0, 1e-9);
}

TEST(RecordReplayStatistics, CentralImagesModeHistograms) {
  // x adds one count to each of its class's 16 pixel histograms: exactly sqrt(d) for every x.
  const Report r = central_images_replay("mode", 1.0);
  std::cout << "central_images (mode):\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  const auto parts = compared(r);
  ASSERT_EQ(parts.size(), 3 * neighbours().size());
  for (const auto& [name, m] : parts) EXPECT_NEAR(m.first / m.second, 1.0, 1e-9) << name;
}

TEST(RecordReplayStatistics, CentralImagesSubsampledQueries) {
  // q_c < 1: x is in the first query's subsample or not (its statistic moves by x's part or not at
  // all); the later queries' draws are shifted by x's, so they are compared by structure only.
  const Report r = central_images_replay("mean", 0.5);
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  const auto parts = compared(r);
  EXPECT_EQ(parts.size(), neighbours().size());
  for (const auto& [name, m] : parts) EXPECT_NE(name.find("query 1"), std::string::npos) << name;
}
