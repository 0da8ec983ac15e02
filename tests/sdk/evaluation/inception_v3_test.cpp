// The FID Inception-V3 against an independent PyTorch reference (tests/fixtures/inception, made by
// make_inception_reference.py, whose own network equals torchvision's Inception3 patched as
// pytorch-fid does): a seeded width/16 network, two image sets (grey 28x28, RGB 32x32) read as
// privdiff reads IDX files, features and logits, Inception Score and FID; the refusals of files
// that are not the network's state dict; and the verification that only pytorch-fid's weights pass
// (full width, the conversion record of the release's SHA-256, the tensors' digest): the width/16
// fixture is refused unless unverified weights are allowed.
#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>
#include <privdiff/evaluation/feature_statistics.hpp>
#include <privdiff/evaluation/inception_v3.hpp>
#include <privdiff/io/content_hash.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>
#include <torch/serialize/archive.h>

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
    auto network = load_fid_inception(fixtures / "tiny_fid_inception.pth", /*allow_unverified=*/true).network;
    return Features{inception_features(*network, read_images("set_a_grey28.idx")),
                    inception_features(*network, read_images("set_b_rgb32.idx"))};
  }();
  return features;
}

// A state dict file written by LibTorch (pickle_save writes torch.save's zip format).
// `records`: string entries, as the conversion script writes its record.
void save_state(const fs::path& file, const std::map<std::string, at::Tensor>& tensors,
                const std::map<std::string, std::string>& records = {}) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor);
  for (const auto& [name, value] : records) dict.insert(name, value);
  const std::vector<char> bytes = torch::pickle_save(dict);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::map<std::string, at::Tensor> state_of(const FidInceptionV3& network) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : network.named_parameters()) out.emplace(item.key(), item.value().detach().clone());
  for (const auto& item : network.named_buffers()) out.emplace(item.key(), item.value().clone());
  return out;
}

std::map<std::string, at::Tensor> fixture_state() {
  std::map<std::string, at::Tensor> out;
  const auto network = load_fid_inception(fixtures / "tiny_fid_inception.pth", true).network;
  for (const auto& item : network->named_parameters()) out.emplace(item.key(), item.value().detach().clone());
  for (const auto& item : network->named_buffers()) out.emplace(item.key(), item.value().clone());
  return out;
}

// What loading `file` throws ("(loaded)" when nothing); "[unverified] " marks UnverifiedInceptionWeights.
std::string load_error(const fs::path& file, bool allow_unverified = true) {
  try {
    load_fid_inception(file, allow_unverified);
  } catch (const UnverifiedInceptionWeights& e) {
    return std::string("[unverified] ") + e.what();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(loaded)";
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("privdiff_inception_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

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
  const TempDir temp;
  const fs::path& dir = temp.path;
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

  // Other kinds of file are named for what they are.
  std::ofstream(dir / "image.png", std::ios::binary) << "\x89PNG\r\n\x1a\n" << std::string(64, '\0');
  EXPECT_NE(load_error(dir / "image.png").find("image.png: a PNG image, not Inception weights"), std::string::npos)
      << load_error(dir / "image.png");
  std::ofstream(dir / "empty.pth", std::ios::binary).flush();
  EXPECT_NE(load_error(dir / "empty.pth").find("empty.pth: an empty file, not Inception weights"), std::string::npos);
  torch::serialize::OutputArchive archive;  // what torch::save and privdiff's checkpoint.pt write
  archive.write("weight", at::ones({2, 2}));
  archive.save_to((dir / "checkpoint.pt").string());
  EXPECT_NE(load_error(dir / "checkpoint.pt").find("checkpoint.pt: a LibTorch archive of modules"), std::string::npos)
      << load_error(dir / "checkpoint.pt");
  std::ifstream tiny(fixtures / "tiny_fid_inception.pth", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(tiny)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "truncated.pth", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(load_error(dir / "truncated.pth").find("truncated.pth: an unreadable or damaged torch.save file"),
            std::string::npos)
      << load_error(dir / "truncated.pth");
  for (const char* name : {"image.png", "empty.pth", "checkpoint.pt", "truncated.pth"}) {
    EXPECT_EQ(load_error(dir / name).find('\n'), std::string::npos) << name << ": one line";
  }
}

TEST(InceptionV3, Sha256OfKnownMessages) {
  // FIPS 180-4's examples, and a million 'a' fed in uneven pieces.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string a(1000, 'a');
  for (std::size_t fed = 0, piece = 1; fed < 1000000; piece = piece % 997 + 1) {
    const std::size_t n = std::min(piece, 1000000 - fed);
    million.update(a.data(), n);
    fed += n;
  }
  EXPECT_EQ(million.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(InceptionV3, TensorsDigestIsTheConversionScriptsAndIgnoresTheContainer) {
  // /usr/bin/python3 scripts/convert_inception_weights.py --check tests/fixtures/inception/tiny_fid_inception.pth
  const std::string python = "a22ff2c34c0918f8d6645be946957f27b5b173bb2856f91ccef9d96bf0c9d600";
  const auto loaded = load_fid_inception(fixtures / "tiny_fid_inception.pth", true);
  EXPECT_EQ(loaded.tensors_sha256, python);
  auto state = fixture_state();  // re-read from the network, with num_batches_tracked
  EXPECT_EQ(inception_tensors_sha256(state), python);
  state["privdiff.anything"] = at::zeros({1});  // records are not part of the digest
  EXPECT_EQ(inception_tensors_sha256(state), python);
  state["fc.bias"][7] += 1.0;
  EXPECT_NE(inception_tensors_sha256(state), python);
}

TEST(InceptionV3, TheWidth16FixtureIsRefusedUnlessUnverifiedWeightsAreAllowed) {
  const fs::path tiny = fixtures / "tiny_fid_inception.pth";
  const std::string refused = load_error(tiny, /*allow_unverified=*/false);
  EXPECT_EQ(refused.rfind("[unverified] " + tiny.string() + ": tensor 'Conv2d_1a_3x3.conv.weight' has shape "
                          "[2, 3, 3, 3], expected [32, 3, 3, 3]: a width/16 Inception-V3 (a test network), not "
                          "pytorch-fid's pt_inception-2015-12-05-6726825d.pth; FIDs on it are not comparable with "
                          "published ones", 0),
            0u)
      << refused;
  const auto allowed = load_fid_inception(tiny, true);
  EXPECT_FALSE(allowed.verified);
  EXPECT_NE(allowed.unverified_reason.find("a width/16 Inception-V3 (a test network)"), std::string::npos);
  EXPECT_EQ(allowed.network->width_divisor(), 16);
}

// Full width: the conversion record decides. (A record is written here by hand, so these files
// prove the checks, not any weights' origin: that is the conversion script's SHA-256 check.)
TEST(InceptionV3, FullWidthWeightsPassOnlyWithTheConversionRecordOfPytorchFidsFile) {
  const TempDir temp;
  at::manual_seed(3);
  const auto real = state_of(FidInceptionV3(1));
  const std::string digest = inception_tensors_sha256(real);
  const std::map<std::string, std::string> record{{source_sha256_key, pytorch_fid_weights_sha256},
                                                  {tensors_sha256_key, digest}};
  const fs::path file = temp.path / "converted.pth";

  save_state(file, real, record);
  const auto verified = load_fid_inception(file);
  EXPECT_TRUE(verified.verified);
  EXPECT_EQ(verified.unverified_reason, "");
  EXPECT_EQ(verified.tensors_sha256, digest);
  EXPECT_EQ(verified.network->width_divisor(), 1);
  EXPECT_TRUE(at::equal(verified.network->named_parameters()["fc.weight"], real.at("fc.weight")));

  save_state(file, real);  // no record
  std::string error = load_error(file, false);
  EXPECT_EQ(error.rfind("[unverified] " + file.string() + ": no conversion record ('privdiff.source_sha256'): not "
                        "written by scripts/convert_inception_weights.py", 0),
            0u)
      << error;
  const auto allowed = load_fid_inception(file, true);
  EXPECT_FALSE(allowed.verified);
  EXPECT_NE(allowed.unverified_reason.find("no conversion record"), std::string::npos);

  auto other_source = record;
  other_source[source_sha256_key] = std::string(64, '0');
  save_state(file, real, other_source);
  error = load_error(file, false);
  EXPECT_NE(error.find("converted from a file whose SHA-256 is " + std::string(64, '0') + ", not pytorch-fid's "
                       "pt_inception-2015-12-05-6726825d.pth (" + pytorch_fid_weights_sha256 + ")"),
            std::string::npos)
      << error;

  auto changed = real;  // a tensor edited after conversion
  changed["Mixed_6c.branch7x7_2.bn.running_var"] = changed.at("Mixed_6c.branch7x7_2.bn.running_var") * 1.01;
  save_state(file, changed, record);
  error = load_error(file, false);
  EXPECT_NE(error.find("its tensors' SHA-256 is " + inception_tensors_sha256(changed) + ", not the " + digest +
                       " recorded when it was converted: changed since"),
            std::string::npos)
      << error;
}

TEST(InceptionV3, FullWidthFilesWithWrongTensorsAreRefusedEvenWhenUnverifiedWeightsAreAllowed) {
  const TempDir temp;
  const auto real = state_of(FidInceptionV3(1));
  const fs::path file = temp.path / "wrong.pth";
  for (const bool allow : {false, true}) {
    auto state = real;
    state["Mixed_6e.branch7x7dbl_5.conv.weight"] = at::zeros({192, 192, 7, 1});
    save_state(file, state);
    std::string error = load_error(file, allow);
    EXPECT_EQ(error, file.string() + ": tensor 'Mixed_6e.branch7x7dbl_5.conv.weight' has shape [192, 192, 7, 1], "
                                     "expected [192, 192, 1, 7] (pytorch-fid's Inception-V3)");
    state = real;
    state.erase("fc.bias");
    save_state(file, state);
    error = load_error(file, allow);
    EXPECT_EQ(error, file.string() + ": missing tensor 'fc.bias', expected shape [1008] (pytorch-fid's Inception-V3)");
  }
}
