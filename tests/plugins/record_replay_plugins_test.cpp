// The record-replay sensitivity audit (tests/sdk/engine/record_replay.hpp) of the installed
// mechanism plugins, as a recipe builds them: dpsgd (both engine paths, chunked), dpdm (K > 1) and
// central_images (mean and mode). The release is what the plugin leaves behind: the model's update
// (SGD, lr 1, no momentum, no EMA: the noised gradient) or the released central images.
#include "../sdk/engine/record_replay.hpp"
#include "../sdk/engine/record_replay_central.hpp"
#include "installed_plugins.hpp"

#include <privdiff/components/mechanism.hpp>
#include <privdiff/engine/central_images.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>

using namespace privdiff;
using namespace privdiff::testing::replay;

namespace {

constexpr std::int64_t records = 21, batch = 7;
constexpr double clip = 1.0;

MechanismFactory installed(const std::string& id, std::map<std::string, sdk::ConfigValue> values) {
  return [id, values](std::uint64_t seed) {
    auto v = values;
    v["seed"] = sdk::ConfigValue{static_cast<std::int64_t>(seed)};
    return privdiff::testing::make_installed<sdk::Mechanism>(id, v);
  };
}

std::map<std::string, sdk::ConfigValue> dp_sgd_values(const std::string& path, std::int64_t physical) {
  return {{"batch_size", sdk::ConfigValue{batch}},          {"steps", sdk::ConfigValue{std::int64_t{3}}},
          {"noise_multiplier", sdk::ConfigValue{0.5}},       {"max_grad_norm", sdk::ConfigValue{clip}},
          {"optimizer", sdk::ConfigValue{std::string("sgd")}}, {"momentum", sdk::ConfigValue{0.0}},
          {"lr", sdk::ConfigValue{1.0}},                      {"ema", sdk::ConfigValue{0.0}},
          {"secure_noise", sdk::ConfigValue{false}},          {"engine_path", sdk::ConfigValue{path}},
          {"physical_batch_size", sdk::ConfigValue{physical}}};
}

void expect_clean(const std::string& name, const MechanismFactory& mechanism) {
  DpSgdAudit a;
  a.name = name;
  a.mechanism = mechanism;
  a.batch_size = batch;
  a.max_grad_norm = clip;
  const Report r = audit_dp_sgd(a, random_images(records), adversarial_neighbours(1e6), typical_reference());
  std::cout << name << ":\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  EXPECT_FALSE(r.measurements.empty());
  EXPECT_LE(r.worst_ratio(), 1.0 + 1e-9);
}

}  // namespace

TEST(RecordReplayPlugins, DpSgdPluginOnEveryPath) {
  for (const std::string path : {"vectorised", "micro_batch", "auto"}) {
    for (const std::int64_t physical : {0, 3}) {
      expect_clean("dpsgd plugin, " + path + ", chunks " + std::to_string(physical),
                   installed("dpsgd", dp_sgd_values(path, physical)));
    }
  }
}

TEST(RecordReplayPlugins, DpdmPluginWithNoiseMultiplicity) {
  for (const std::string path : {"vectorised", "micro_batch"}) {
    auto values = dp_sgd_values(path, 2);
    values["noise_multiplicity"] = sdk::ConfigValue{std::int64_t{4}};
    expect_clean("dpdm plugin K = 4, " + path, installed("dpdm", values));
  }
}

// The central_images stage on D and D ∪ {x}: same ledger (the plan), same number of images, shapes
// and labels, and each query's class sums moved by at most Delta, in x's class only.
TEST(RecordReplayPlugins, CentralImagesPluginMeanAndMode) {
  CentralReplayData replay;
  constexpr std::int64_t n = CentralReplayData::n, classes = CentralReplayData::classes;
  auto& gen = replay.gen;
  const at::Tensor &dark = replay.dark, &uniform = replay.uniform, &labels = replay.labels;
  const std::vector<Neighbour> xs{{"all +1, class 0", at::ones({1, 4, 4}), 0},
                                  {"all -1, class 1", -at::ones({1, 4, 4}), 1},
                                  {"random, class 1", at::rand({1, 4, 4}, gen) * 2 - 1, 1}};
  for (const std::string statistic : {"mean", "mode"}) {
    engine::CentralImageOptions o;
    o.statistic = engine::central_statistic_from_string(statistic);
    o.queries = 3;
    o.sampling_rate = 0.5;
    o.noise_multiplier = statistic == "mean" ? 1e-6 : 0.3;
    o.resolution = 4;
    o.bins = 4;
    o.post_process = false;
    const ReplayData d(statistic == "mean" ? dark : uniform, labels, classes);
    const std::uint64_t seed = replay_seed(n, o.sampling_rate, o.sampling_rate, true);
    auto release = [&](const ReplayData& data, std::vector<std::string>& ledger_log) {
      auto mechanism = privdiff::testing::make_installed<sdk::Mechanism>(
          "central_images", {{"statistic", sdk::ConfigValue{statistic}},
                             {"queries", sdk::ConfigValue{o.queries}},
                             {"sampling_rate", sdk::ConfigValue{o.sampling_rate}},
                             {"noise_multiplier", sdk::ConfigValue{o.noise_multiplier}},
                             {"resolution", sdk::ConfigValue{o.resolution}},
                             {"bins", sdk::ConfigValue{o.bins}},
                             {"post_process", sdk::ConfigValue{false}},
                             {"secure_noise", sdk::ConfigValue{false}},
                             {"seed", sdk::ConfigValue{static_cast<std::int64_t>(seed)}}});
      ReplayModel model(at::kDouble, 0);
      sdk::PrivacyLedger ledger;
      sdk::StageContext context{model, data, ledger, 0, {}};
      context.num_classes = classes;
      engine::CentralImages out;
      context.release = [&](const at::Tensor& i, const at::Tensor& l) { out = {i.clone(), l.clone()}; };
      mechanism->run(context);
      ledger_log = {ledger.total().to_string(), mechanism->planned_events(data.size()).to_string(),
                    std::to_string(mechanism->released_examples(data.size(), classes))};
      for (const auto& c : ledger.caveats()) ledger_log.push_back(c);
      return out;
    };
    std::vector<std::string> log_d;
    const engine::CentralImages on_d = release(d, log_d);
    EXPECT_EQ(log_d[0], log_d[1]);  // the ledger is the plan
    Report all;
    for (const Neighbour& x : xs) {
      std::vector<std::string> log_x;
      const engine::CentralImages on_x = release(d.with(x.image, x.label), log_x);
      all.add(first_difference("central_images plugin, x = " + x.name + ": ledger, plan or release count", log_d, log_x));
      all.merge(compare_central_releases("central_images plugin, " + statistic, o, on_d, on_x, x, n, classes));
    }
    std::cout << "central_images plugin, " << statistic << ":\n" << all.describe();
    EXPECT_TRUE(all.violations.empty()) << all.describe();
    if (statistic == "mean") {
      EXPECT_NEAR(all.worst_ratio(), 1.0, 1e-4);  // x = all +1 is Delta away
    } else {
      EXPECT_GT(all.worst_ratio(), 0.0);  // x moved some pixel's mode
    }
  }
}
