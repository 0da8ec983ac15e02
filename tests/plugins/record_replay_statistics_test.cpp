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

TEST(RecordReplayStatistics, PrivateEvolutionVotes) {
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
  values["iterations"] = ConfigValue{std::int64_t{2}};  // the second is adaptive: structure only
  values["samples_per_class"] = ConfigValue{std::int64_t{4}};
  values["votes_per_record"] = ConfigValue{std::int64_t{2}};
  values["noise_multiplier"] = ConfigValue{0.5};
  values["threshold"] = ConfigValue{0.5};
  values["sampler_steps"] = ConfigValue{std::int64_t{2}};
  const auto stage = statistic_stage(installed("private_evolution", values), *generator, &pub, classes, 3);
  const Report r = check_statistic_releases(stage, d, neighbours());
  expect_exact_sensitivity("private_evolution plugin", r);
}
