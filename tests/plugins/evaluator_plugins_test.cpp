// The evaluator plugins' behaviour on data with known answers (tiny networks and data):
//  - inception (on the fixture's width/16 weights, allowed as unverified): FID of a set with itself
//    is ~0 and grows with a shift of the images; IS and precision/recall are in range; every number
//    is labelled not comparable; without allow_unverified_weights those weights are refused, and so
//    is a missing weights file, when the evaluator is made;
//  - dpdm_classifiers: trained on learnable images it beats chance on held-out real images, trained
//    on images whose labels are noise it does not; benchmark_classifiers' ResNet learns them too
//    (its networks on noise: sdk_tests' SmallBenchmarkNetworkOnNoise);
//  - benchmark_classifiers selection = "real" carries its caveat.
#include "installed_plugins.hpp"

#include <privdiff/components/evaluator.hpp>
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

using namespace privdiff;
namespace fs = std::filesystem;

namespace {

const fs::path inception_fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "inception";

double metric(const sdk::EvaluationResult& r, const std::string& name) {
  for (const auto& [n, v] : r.metrics) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

/// 3-channel 32x32 images whose class (0..3) is where a bright square sits; `noisy_labels` gives
/// them random labels instead.
sdk::LabelledImages squares(std::int64_t n, std::uint64_t seed, bool noisy_labels = false) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor labels = at::randint(0, 4, {n}, g, at::kLong);
  at::Tensor images = at::rand({n, 3, 32, 32}, g) * 0.4 - 1;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t c = labels[i].item<std::int64_t>();
    images[i].narrow(1, (c / 2) * 16 + 2, 12).narrow(2, (c % 2) * 16 + 2, 12).fill_(1.0);
  }
  return {images, noisy_labels ? at::randint(0, 4, {n}, g, at::kLong) : labels};
}

struct Input {
  std::map<std::string, sdk::LabelledImages> splits;
  std::ostringstream log;
  sdk::EvaluationInput input;
  Input(sdk::LabelledImages samples, sdk::LabelledImages test, sdk::LabelledImages train, std::int64_t classes,
        const std::string& name) {
    splits["test"] = std::move(test);
    splits["train"] = std::move(train);
    input.samples = std::move(samples);
    input.real = [this](const std::string& split) -> const sdk::LabelledImages& { return splits.at(split); };
    input.real_name = name;
    input.num_classes = classes;
    input.cache_dir = fs::temp_directory_path() / ("privdiff-evaluator-test-" + std::to_string(::getpid()));
    input.log = &log;
  }
  ~Input() { fs::remove_all(input.cache_dir); }
};

sdk::LabelledImages fixture_set(const std::string& file) {
  const sdk::IdxArray idx = sdk::read_idx(inception_fixtures / file);
  at::Tensor bytes = at::from_blob(const_cast<std::uint8_t*>(idx.data.data()),
                                   std::vector<std::int64_t>(idx.shape.begin(), idx.shape.end()), at::kByte).clone();
  if (bytes.dim() == 3) bytes = bytes.unsqueeze(1);
  return {sdk::pixels_from_bytes(bytes), at::zeros({bytes.size(0)}, at::kLong)};
}

}  // namespace

TEST(InceptionEvaluator, FidOfASetWithItselfIsZeroAndGrowsWithAShift) {
  const sdk::LabelledImages real = fixture_set("set_b_rgb32.idx");
  auto inception = privdiff::testing::make_installed<sdk::Evaluator>(
      "inception", {{"weights", sdk::ConfigValue{(inception_fixtures / "tiny_fid_inception.pth").string()}},
                    {"allow_unverified_weights", sdk::ConfigValue{true}},
                    {"is_splits", sdk::ConfigValue{std::int64_t{4}}}});
  double previous = -1;
  for (const double shift : {0.0, 0.2, 0.5}) {
    sdk::LabelledImages shifted{(real.images + shift).clamp(-1, 1), real.labels};
    Input in(shifted, real, real, 1, "fixture");
    const sdk::EvaluationResult r = inception->evaluate(in.input);
    // Unverified weights: every metric's name says so (no compare column mixes them with FIDs).
    std::vector<std::string> names;
    for (const auto& [name, value] : r.metrics) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"fid_not_comparable", "fid_floor_not_comparable",
                                               "inception_score_not_comparable", "inception_score_std_not_comparable",
                                               "precision_not_comparable", "recall_not_comparable"}));
    if (shift == 0) {
      EXPECT_NEAR(metric(r, "fid_not_comparable"), 0.0, 1e-6 * std::max(1.0, metric(r, "fid_floor_not_comparable")));
    }
    EXPECT_GT(metric(r, "fid_not_comparable"), previous) << "shift " << shift;
    previous = metric(r, "fid_not_comparable");
    EXPECT_GE(metric(r, "inception_score_not_comparable"), 1.0);
    EXPECT_LE(metric(r, "inception_score_not_comparable"), 1008.0);
    for (const char* m : {"precision_not_comparable", "recall_not_comparable"}) {
      EXPECT_GE(metric(r, m), 0.0);
      EXPECT_LE(metric(r, m), 1.0);
    }
    if (shift == 0) {
      EXPECT_DOUBLE_EQ(metric(r, "precision_not_comparable"), 1.0);
    }
    EXPECT_EQ(r.provenance.rfind("NOT COMPARABLE with published FIDs: ", 0), 0u) << r.provenance;
    EXPECT_NE(r.provenance.find("UNVERIFIED weights tiny_fid_inception.pth (tensor 'Conv2d_1a_3x3.conv.weight' has "
                                "shape [2, 3, 3, 3], expected [32, 3, 3, 3]: a width/16 Inception-V3"),
              std::string::npos)
        << r.provenance;
    ASSERT_FALSE(r.caveats.empty());
    EXPECT_EQ(r.caveats[0].rfind("not comparable with published FIDs: the Inception weights tiny_fid_inception.pth "
                                 "are not pytorch-fid's",
                                 0),
              0u)
        << r.caveats[0];
  }
  EXPECT_GT(previous, 10.0);
}

TEST(InceptionEvaluator, RefusesAMissingWeightsFileByKey) {
  try {
    privdiff::testing::make_installed<sdk::Evaluator>("inception", {{"weights", sdk::ConfigValue{std::string("/nonexistent.pth")}}});
    FAIL() << "a missing weights file was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("evaluator.weights: /nonexistent.pth is not a file"), std::string::npos)
        << e.what();
  }
}

TEST(InceptionEvaluator, RefusesTheWidth16FixtureWithoutTheOptIn) {
  const std::string tiny = (inception_fixtures / "tiny_fid_inception.pth").string();
  for (const auto& config : std::vector<std::map<std::string, sdk::ConfigValue>>{
           {{"weights", sdk::ConfigValue{tiny}}},
           {{"weights", sdk::ConfigValue{tiny}}, {"allow_unverified_weights", sdk::ConfigValue{false}}}}) {
    try {
      privdiff::testing::make_installed<sdk::Evaluator>("inception", config);
      FAIL() << "the width/16 fixture was accepted as pytorch-fid's weights";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("evaluator.weights: " + tiny + ": tensor 'Conv2d_1a_3x3.conv.weight' has shape [2, 3, 3, 3], "
                          "expected [32, 3, 3, 3]: a width/16 Inception-V3 (a test network), not pytorch-fid's "
                          "pt_inception-2015-12-05-6726825d.pth; FIDs on it are not comparable with published ones "
                          "(for tests, allow_unverified_weights = true accepts them"),
                std::string::npos)
          << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(ClassifierEvaluators, BeatChanceOnLearnableImagesAndNotOnNoiseLabels) {
  const sdk::LabelledImages test = squares(100, 2);
  for (const bool noise : {false, true}) {
    Input in(squares(240, 1, noise), test, test, 4, "squares");
    auto dpdm = privdiff::testing::make_installed<sdk::Evaluator>(
        "dpdm_classifiers", {{"classifiers", sdk::ConfigValue{std::vector<std::string>{"logreg", "cnn"}}},
                             {"epochs", sdk::ConfigValue{std::int64_t{8}}}});
    const double logreg = metric(dpdm->evaluate(in.input), "accuracy.logreg");
    if (noise) {  // chance is 0.25
      EXPECT_LT(logreg, 0.45) << in.log.str();
      continue;  // (the benchmark networks on noise: sdk_tests' SmallBenchmarkNetworkOnNoise)
    }
    EXPECT_GT(logreg, 0.8) << in.log.str();
    auto bench = privdiff::testing::make_installed<sdk::Evaluator>(
        "benchmark_classifiers", {{"networks", sdk::ConfigValue{std::vector<std::string>{"resnet"}}},
                                  {"epochs", sdk::ConfigValue{std::int64_t{4}}},
                                  {"batch_size", sdk::ConfigValue{std::int64_t{16}}}});
    const sdk::EvaluationResult r = bench->evaluate(in.input);
    const double resnet = metric(r, "accuracy.resnet");
    EXPECT_DOUBLE_EQ(metric(r, "accuracy.mean"), resnet);
    EXPECT_GT(resnet, 0.6) << in.log.str();
    EXPECT_TRUE(r.caveats.empty());
  }
}

TEST(ClassifierEvaluators, SelectionOnRealDataCarriesACaveat) {
  const sdk::LabelledImages test = squares(40, 2);
  Input in(squares(60, 1), test, squares(120, 3), 4, "squares");
  auto bench = privdiff::testing::make_installed<sdk::Evaluator>(
      "benchmark_classifiers", {{"networks", sdk::ConfigValue{std::vector<std::string>{"resnet"}}},
                                {"epochs", sdk::ConfigValue{std::int64_t{1}}},
                                {"batch_size", sdk::ConfigValue{std::int64_t{32}}},
                                {"selection", sdk::ConfigValue{std::string("real")}}});
  const sdk::EvaluationResult r = bench->evaluate(in.input);
  ASSERT_EQ(r.caveats.size(), 1u);
  EXPECT_NE(r.caveats[0].find("a non-private choice made on private data"), std::string::npos) << r.caveats[0];
  EXPECT_EQ(r.counts.at("validation"), 10);  // 1/12 of the 120 real training images
  EXPECT_EQ(r.counts.at("train"), 60);       // every sample trains
}
