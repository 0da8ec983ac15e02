// The FID Inception-V3 against an independent PyTorch reference (tests/fixtures/inception, made by
// make_inception_reference.py, whose own network equals torchvision's Inception3 patched as
// pytorch-fid does): a seeded width/16 network, two image sets (grey 28x28, RGB 32x32) read as
// privdiff reads IDX files, features and logits, Inception Score and FID; and the refusals of
// files that are not the network's state dict.
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>
#include <privdiff/evaluation/feature_statistics.hpp>
#include <privdiff/evaluation/inception_v3.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

using namespace privdiff::sdk;
using namespace privdiff::sdk::evaluation;
namespace fs = std::filesystem;

namespace {

const fs::path fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "inception";

nlohmann::json reference() {
  std::ifstream in(fixtures / "reference.json");
  return nlohmann::json::parse(in);
}

// IDX bytes -> float images [N, C, H, W] in [-1, 1] (a rank-3 file is grey [N, H, W]).
at::Tensor read_images(const std::string& name) {
  const IdxArray idx = read_idx(fixtures / name);
  at::Tensor bytes = at::empty(idx.shape, at::kByte);
  std::copy(idx.data.begin(), idx.data.end(), bytes.data_ptr<std::uint8_t>());
  if (bytes.dim() == 3) bytes = bytes.unsqueeze(1);
  return pixels_from_bytes(bytes);
}

at::Tensor rows(const nlohmann::json& values) {
  const auto nested = values.get<std::vector<std::vector<double>>>();
  at::Tensor out = at::empty({static_cast<std::int64_t>(nested.size()), static_cast<std::int64_t>(nested[0].size())},
                             at::kDouble);
  for (std::size_t i = 0; i < nested.size(); ++i) {
    for (std::size_t j = 0; j < nested[i].size(); ++j) out[i][j] = nested[i][j];
  }
  return out;
}

// Features are compared relative to their scale: max |ours - reference| / max |reference|.
double relative_max_difference(const at::Tensor& ours, const at::Tensor& reference) {
  return (ours.to(at::kDouble) - reference).abs().max().item<double>() / reference.abs().max().item<double>();
}

struct Features {
  InceptionOutputs a, b;
};

const Features& features_of_both_sets() {
  static const Features features = [] {
    auto network = load_fid_inception(fixtures / "tiny_fid_inception.pth");
    return Features{inception_features(*network, read_images("set_a_grey28.idx")),
                    inception_features(*network, read_images("set_b_rgb32.idx"))};
  }();
  return features;
}

// A state dict file written by LibTorch (pickle_save writes torch.save's zip format).
void save_state(const fs::path& file, const std::map<std::string, at::Tensor>& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor);
  const std::vector<char> bytes = torch::pickle_save(dict);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::map<std::string, at::Tensor> fixture_state() {
  std::map<std::string, at::Tensor> out;
  const auto network = load_fid_inception(fixtures / "tiny_fid_inception.pth");
  for (const auto& item : network->named_parameters()) out.emplace(item.key(), item.value().detach().clone());
  for (const auto& item : network->named_buffers()) out.emplace(item.key(), item.value().clone());
  return out;
}

std::string load_error(const fs::path& file) {
  try {
    load_fid_inception(file);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace

TEST(InceptionV3, HasTorchvisionsTensorNamesAndShapes) {
  FidInceptionV3 real;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& item : real.named_parameters()) shapes[item.key()] = item.value().sizes().vec();
  EXPECT_EQ(shapes.size(), 94u * 3 + 2);  // 94 conv units (conv.weight, bn.weight, bn.bias) and fc
  EXPECT_EQ(shapes.at("Conv2d_1a_3x3.conv.weight"), (std::vector<std::int64_t>{32, 3, 3, 3}));
  EXPECT_EQ(shapes.at("Mixed_5b.branch_pool.conv.weight"), (std::vector<std::int64_t>{32, 192, 1, 1}));
  EXPECT_EQ(shapes.at("Mixed_6e.branch7x7dbl_5.conv.weight"), (std::vector<std::int64_t>{192, 192, 1, 7}));
  EXPECT_EQ(shapes.at("Mixed_7c.branch3x3dbl_1.conv.weight"), (std::vector<std::int64_t>{448, 2048, 1, 1}));
  EXPECT_EQ(shapes.at("fc.weight"), (std::vector<std::int64_t>{1008, 2048}));
  EXPECT_EQ(FidInceptionV3(16).feature_dimension(), 128);
  EXPECT_THROW(FidInceptionV3(3), std::invalid_argument);
}

TEST(InceptionV3, FeaturesAndLogitsMatchThePyTorchReference) {
  const nlohmann::json ref = reference();
  const double tolerance = ref["tolerances"]["features_max_abs_diff_over_max_abs"];
  const std::int64_t first = ref["first_images"];
  const Features& f = features_of_both_sets();
  for (const auto& [set, outputs] : {std::pair{"set_a", f.a}, std::pair{"set_b", f.b}}) {
    EXPECT_EQ(outputs.pool3.sizes(), (std::vector<std::int64_t>{200, 128})) << set;
    EXPECT_EQ(outputs.logits.sizes(), (std::vector<std::int64_t>{200, 1008})) << set;
    const double pool3 = relative_max_difference(outputs.pool3.narrow(0, 0, first), rows(ref[set]["pool3"]));
    const double logits = relative_max_difference(outputs.logits.narrow(0, 0, first), rows(ref[set]["logits"]));
    EXPECT_LT(pool3, tolerance) << set;
    EXPECT_LT(logits, tolerance) << set;
    std::printf("%s: pool3 max diff / max |value| %.2e, logits %.2e\n", set, pool3, logits);
  }
}

TEST(InceptionV3, InceptionScoreMatchesTheReference) {
  const nlohmann::json ref = reference();
  const double tolerance = ref["tolerances"]["inception_score_relative"];
  const Features& f = features_of_both_sets();
  for (const auto& [set, outputs] : {std::pair{"set_a", f.a}, std::pair{"set_b", f.b}}) {
    const InceptionScore score = inception_score(outputs.logits, ref[set]["inception_score"]["splits"]);
    const double mean = ref[set]["inception_score"]["mean"], std = ref[set]["inception_score"]["std"];
    EXPECT_NEAR(score.mean, mean, tolerance * mean) << set;
    EXPECT_NEAR(score.std, std, tolerance * mean) << set;
    std::printf("%s: IS %.6f +- %.6f (reference %.6f +- %.6f)\n", set, score.mean, score.std, mean, std);
  }
}

TEST(InceptionV3, InceptionScoreOfKnownDistributions) {
  // Confident and uniform over K classes: p(y) is uniform over K, each KL is log K -> IS = K.
  const at::Tensor confident = at::eye(8, at::kDouble).repeat({5, 1}) * 200.0;
  EXPECT_NEAR(inception_score(confident, 5).mean, 8.0, 1e-9);
  EXPECT_NEAR(inception_score(confident, 5).std, 0.0, 1e-9);
  // Identical predictions: p(y|x) = p(y) -> IS = 1.
  EXPECT_NEAR(inception_score(at::randn({1, 10}).repeat({30, 1}), 3).mean, 1.0, 1e-12);
  // N not divisible: 10 rows, 3 splits -> rows [0, 3), [3, 6), [6, 10); all of them count.
  const at::Tensor logits = at::randn({10, 6}, at::kDouble) * 3;
  EXPECT_NO_THROW(inception_score(logits, 3));
  EXPECT_THROW(inception_score(logits, 11), std::invalid_argument);
}

// FID: the SDK's Fréchet distance (feature_statistics.hpp) on the pool3 features, against
// pytorch-fid's formula (numpy mean, np.cov, scipy sqrtm) in the reference script.
namespace {

double fid_of(const at::Tensor& features_a, const at::Tensor& features_b) {
  return frechet_distance(fit_gaussian(features_a), fit_gaussian(features_b));
}

}  // namespace

TEST(InceptionV3, FrechetDistanceMatchesTheReference) {
  const nlohmann::json ref = reference();
  const Features& f = features_of_both_sets();
  const double fid = fid_of(f.a.pool3, f.b.pool3), reference_fid = ref["fid_a_b"];
  const double self = fid_of(f.a.pool3, f.a.pool3);
  std::printf("FID A-B %.6f (reference %.6f), A-A %.3e\n", fid, reference_fid, self);
  EXPECT_NEAR(fid, reference_fid, ref["tolerances"]["fid_relative"].get<double>() * reference_fid);
  EXPECT_NEAR(self, 0.0, ref["tolerances"]["fid_self_absolute"].get<double>());
}

TEST(InceptionV3, RefusesFilesThatAreNotItsStateDict) {
  const fs::path dir = fs::temp_directory_path() / ("privdiff_inception_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string convert = "scripts/convert_inception_weights.py";

  std::ofstream(dir / "garbage.pth", std::ios::binary) << std::string(4096, '\x5a') << "not a torch file";
  EXPECT_NE(load_error(dir / "garbage.pth").find(convert), std::string::npos) << load_error(dir / "garbage.pth");
  // What torch.save(model.state_dict()) writes (an OrderedDict) and pytorch-fid's release's format.
  for (const auto& [name, why] : {std::pair{"ordered_dict_state.pth", "OrderedDict"},
                                  std::pair{"legacy_format_state.pth", "legacy format"}}) {
    const std::string error = load_error(fixtures / name);
    EXPECT_NE(error.find(convert), std::string::npos) << error;
    EXPECT_NE(error.find(name), std::string::npos) << error;
    EXPECT_NE(error.find(why), std::string::npos) << error;
  }
  EXPECT_NE(load_error(dir / "absent.pth").find("no such file"), std::string::npos);

  auto state = fixture_state();
  state["Mixed_6c.branch7x7_2.conv.weight"] = at::zeros({10, 10, 7, 1});
  save_state(dir / "wrong_shape.pth", state);
  const std::string wrong_shape = load_error(dir / "wrong_shape.pth");
  EXPECT_NE(wrong_shape.find("wrong_shape.pth: tensor 'Mixed_6c.branch7x7_2.conv.weight' has shape [10, 10, 7, 1], "
                             "expected [10, 10, 1, 7]"),
            std::string::npos)
      << wrong_shape;

  state = fixture_state();
  state.erase("Mixed_7b.branch_pool.bn.running_var");
  save_state(dir / "missing.pth", state);
  const std::string missing = load_error(dir / "missing.pth");
  EXPECT_NE(missing.find("missing tensor 'Mixed_7b.branch_pool.bn.running_var', expected shape [12]"), std::string::npos)
      << missing;

  state = fixture_state();
  state["AuxLogits.fc.weight"] = at::zeros({1008, 48});
  save_state(dir / "extra.pth", state);
  EXPECT_NE(load_error(dir / "extra.pth").find("unexpected tensor 'AuxLogits.fc.weight'"), std::string::npos);

  state = fixture_state();
  state.erase("Mixed_5b.branch1x1.bn.num_batches_tracked");  // optional: still loads
  save_state(dir / "no_counter.pth", state);
  EXPECT_EQ(load_error(dir / "no_counter.pth"), "(loaded)");
  fs::remove_all(dir);
}
