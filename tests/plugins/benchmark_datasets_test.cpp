// The benchmark's datasets read from their official distributions: cifar10 (the binary version)
// and celeba (aligned JPEGs + list files), on the tiny fixtures that
// tests/fixtures/{cifar10,celeba}/make_*_fixture.py write: content down to the pixel, splits,
// DPImageBench's CelebA preprocessing, and refusals that name the file (and record or line).
// Also EMNIST's file names and transposed images, through the idx plugin.
#include "installed_datasets.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <set>

using namespace privdiff;
using privdiff::testing::error_of;
using privdiff::testing::installed_plugins;
using privdiff::testing::integer;
using privdiff::testing::open_data;
using privdiff::testing::text;
namespace fs = std::filesystem;

namespace {

const fs::path cifar = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "cifar10" / "cifar-10-batches-bin";
const fs::path celeba = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "celeba";

// A private copy of a fixture directory, to damage.
fs::path copy_of(const fs::path& fixture, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("privdiff_benchmark_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::copy(fixture, dir, fs::copy_options::recursive);
  return dir;
}


at::Tensor all_bytes(const sdk::Dataset& data) { return sdk::pixels_to_bytes(data.images(at::arange(data.size(), at::kLong))); }
at::Tensor all_labels(const sdk::Dataset& data) { return data.labels(at::arange(data.size(), at::kLong)); }

// --- CIFAR-10 -----------------------------------------------------------------------------------

// The fixture's image of class `label`, record g of its split (make_cifar10_fixture.py's formula;
// stripe amplitude 48 and band height 8 in train, 40 and 4 in test).
at::Tensor cifar_fixture_image(std::int64_t label, std::int64_t g, int amplitude, std::int64_t band) {
  static const std::array<std::array<int, 3>, 10> palette{{{90, 160, 230}, {220, 40, 40}, {240, 220, 60}, {250, 140, 30},
                                                            {140, 90, 50}, {210, 180, 140}, {40, 180, 70}, {80, 50, 30},
                                                            {20, 40, 130}, {150, 150, 150}}};
  at::Tensor out = at::empty({3, 32, 32}, at::kByte);
  auto a = out.accessor<std::uint8_t, 3>();
  const std::int64_t w = 2 + label % 4;
  for (int c = 0; c < 3; ++c) {
    for (std::int64_t y = 0; y < 32; ++y) {
      for (std::int64_t x = 0; x < 32; ++x) {
        a[c][y][x] = static_cast<std::uint8_t>(palette[static_cast<std::size_t>(label)][static_cast<std::size_t>(c)] * 3 / 4 +
                                               amplitude * (((x + g % w) / w + y / band) % 2));
      }
    }
  }
  return out;
}

void expect_cifar_split(const sdk::Dataset& data, const std::function<std::int64_t(std::int64_t)>& label_of, int amplitude,
                        std::int64_t band) {
  const at::Tensor bytes = all_bytes(data), labels = all_labels(data);
  for (std::int64_t g = 0; g < data.size(); ++g) {
    EXPECT_EQ(labels[g].item<std::int64_t>(), label_of(g)) << "record " << g;
    EXPECT_TRUE(bytes[g].equal(cifar_fixture_image(label_of(g), g, amplitude, band))) << "record " << g;
  }
}

TEST(Cifar10Dataset, TrainIsTheFiveDataBatchesInOrderPixelForPixel) {
  auto train = open_data("cifar10", {{"path", text(cifar.string())}});
  EXPECT_EQ(train->size(), 40);
  EXPECT_EQ(train->num_classes(), 10);
  EXPECT_FALSE(train->is_public());
  EXPECT_EQ(train->name(), "cifar10 (train)");
  EXPECT_EQ(train->images(at::arange(2, at::kLong)).sizes(), (std::vector<std::int64_t>{2, 3, 32, 32}));
  expect_cifar_split(*train, [](std::int64_t g) { return g % 10; }, 48, 8);
}

TEST(Cifar10Dataset, TestIsTheTestBatch) {
  auto test = open_data("cifar10", {{"path", text(cifar.string())}, {"split", text("test")}, {"public", sdk::ConfigValue{true}}});
  EXPECT_EQ(test->size(), 10);
  EXPECT_TRUE(test->is_public());
  EXPECT_EQ(test->name(), "cifar10 (test)");
  expect_cifar_split(*test, [](std::int64_t g) { return (3 * g + 1) % 10; }, 40, 4);
}

TEST(Cifar10Dataset, RefusesDamagedBatchesNamingFileAndRecord) {
  const fs::path dir = copy_of(cifar, "cifar_damaged");
  fs::resize_file(dir / "data_batch_3.bin", 8 * 3073 - 100);
  std::string error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "data_batch_3.bin").string() + ": 24484 bytes, expected a positive multiple of 3073"),
            std::string::npos)
      << error;
  fs::copy_file(cifar / "data_batch_3.bin", dir / "data_batch_3.bin", fs::copy_options::overwrite_existing);
  {
    std::fstream f(dir / "data_batch_2.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 * 3073);
    f.put(static_cast<char>(10));
  }
  error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "data_batch_2.bin").string() + ": record 2 has label 10, expected 0-9"), std::string::npos) << error;
  fs::copy_file(cifar / "data_batch_2.bin", dir / "data_batch_2.bin", fs::copy_options::overwrite_existing);
  fs::remove(dir / "data_batch_4.bin");
  EXPECT_EQ(error_of([&] { open_data("cifar10", {{"path", text(dir.string())}, {"split", text("test")}}); }), "(no error)");
  error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "data_batch_4.bin").string() + ": batch file not found"), std::string::npos) << error;
  fs::remove_all(dir);
}

TEST(Cifar10Dataset, RefusesABatchTruncatedAtARecordBoundary) {
  // A whole number of records reads as a whole file; the five data batches hold the same number, so
  // one that holds fewer than the others is cut short (the fixture's hold 8, the official files 10,000).
  const fs::path dir = copy_of(cifar, "cifar_truncated");
  fs::resize_file(dir / "data_batch_3.bin", 5 * 3073);
  std::string error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "data_batch_3.bin").string() + ": 5 records, but data_batch_1.bin holds 8: the five "
                       "data batches hold the same number (10,000 each in the official files), so this one is truncated"),
            std::string::npos)
      << error;
  fs::copy_file(cifar / "data_batch_3.bin", dir / "data_batch_3.bin", fs::copy_options::overwrite_existing);
  fs::resize_file(dir / "data_batch_1.bin", 3 * 3073);  // the first one short: named too
  error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "data_batch_1.bin").string() + ": 3 records, but data_batch_2.bin holds 8"),
            std::string::npos)
      << error;
  EXPECT_EQ(error_of([&] { open_data("cifar10", {{"path", text(dir.string())}, {"split", text("test")}}); }), "(no error)");
  fs::remove_all(dir);
}

TEST(Cifar10Dataset, RefusesThePythonAndMatlabVersionsAndPointsIntoTheArchiveFolder) {
  const fs::path dir = copy_of(cifar, "cifar_versions");
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove(entry.path());
  std::ofstream(dir / "data_batch_1") << "pickle";
  std::string error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find("this is the python version"), std::string::npos) << error;
  EXPECT_NE(error.find("download the binary version"), std::string::npos) << error;
  fs::remove(dir / "data_batch_1");
  std::ofstream(dir / "data_batch_1.mat") << "MATLAB 5.0 MAT-file";
  error = error_of([&] { open_data("cifar10", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find("this is the MATLAB version"), std::string::npos) << error;
  fs::remove_all(dir);
  error = error_of([&] { open_data("cifar10", {{"path", text(cifar.parent_path().string())}}); });
  EXPECT_NE(error.find("set path to " + cifar.string()), std::string::npos) << error;
  EXPECT_EQ(error_of([] { open_data("cifar10", {{"path", text("/nonexistent")}}); }), "data: /nonexistent is not a directory");
}

// --- CelebA -------------------------------------------------------------------------------------

const std::set<std::int64_t> male{2, 3, 5, 8, 10, 13, 14, 16, 17, 19, 22, 24};  // make_celeba_fixture.py's MALE
const std::set<std::int64_t> smiling{1, 2, 4, 6, 7, 9, 17, 18, 21, 22};

at::Tensor labels_of(const std::set<std::int64_t>& positive, std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = first; i < first + count; ++i) out.push_back(positive.count(i) ? 1 : 0);
  return at::tensor(out, at::kLong);
}

TEST(CelebaDataset, SplitsFollowThePartitionFileAndMaleIsTheDefaultLabel) {
  auto train = open_data("celeba", {{"path", text(celeba.string())}});
  EXPECT_EQ(train->size(), 16);
  EXPECT_EQ(train->num_classes(), 2);
  EXPECT_FALSE(train->is_public());
  EXPECT_EQ(train->name(), "celeba Male (train)");
  EXPECT_EQ(train->images(at::arange(1, at::kLong)).sizes(), (std::vector<std::int64_t>{1, 3, 32, 32}));
  EXPECT_TRUE(all_labels(*train).equal(labels_of(male, 1, 16)));
  auto valid = open_data("celeba", {{"path", text(celeba.string())}, {"split", text("valid")}});
  EXPECT_TRUE(all_labels(*valid).equal(labels_of(male, 17, 4)));
  auto test = open_data("celeba", {{"path", text(celeba.string())}, {"split", text("test")}, {"public", sdk::ConfigValue{true}}});
  EXPECT_TRUE(all_labels(*test).equal(labels_of(male, 21, 4)));
  EXPECT_TRUE(test->is_public());
  // The fixture's classes differ visibly: Male faces are blue, the others pink (the middle of the
  // image is face; the background is any colour).
  const at::Tensor middle = all_bytes(*train).to(at::kFloat).slice(2, 10, 22).slice(3, 10, 22);
  const at::Tensor blue_minus_red = middle.select(1, 2).mean({1, 2}) - middle.select(1, 0).mean({1, 2});
  const at::Tensor is_male = all_labels(*train) == 1;
  EXPECT_GT(blue_minus_red.masked_select(is_male).min().item<float>(), blue_minus_red.masked_select(~is_male).max().item<float>());
}

TEST(CelebaDataset, AttributeMaxImagesAndImageSize) {
  auto smiles = open_data("celeba", {{"path", text(celeba.string())}, {"attribute", text("Smiling")}});
  EXPECT_EQ(smiles->name(), "celeba Smiling (train)");
  EXPECT_TRUE(all_labels(*smiles).equal(labels_of(smiling, 1, 16)));
  auto first = open_data("celeba", {{"path", text(celeba.string())}, {"max_images", integer(5)}, {"image_size", integer(64)}});
  EXPECT_EQ(first->size(), 5);
  EXPECT_TRUE(all_labels(*first).equal(labels_of(male, 1, 5)));
  EXPECT_EQ(first->images(at::arange(5, at::kLong)).sizes(), (std::vector<std::int64_t>{5, 3, 64, 64}));
}

// DPImageBench's own preprocessing of the fixture (PIL decode, centre crop, LANCZOS to 32), as
// make_celeba_fixture.py wrote it: the plugin matches it up to the JPEG decoders' and rounding's
// differences (measured: 3.5% of the values off by one grey level, 0.01% by two).
TEST(CelebaDataset, MatchesDPImageBenchsPreprocessing) {
  std::vector<at::Tensor> parts;
  for (const char* split : {"train", "valid", "test"}) parts.push_back(all_bytes(*open_data("celeba", {{"path", text(celeba.string())}, {"split", text(split)}})));
  const at::Tensor ours = at::cat(parts).to(at::kInt);
  std::ifstream in(celeba / "dpimagebench_32.bin", std::ios::binary);
  std::vector<char> raw(24 * 3 * 32 * 32);
  ASSERT_TRUE(in.read(raw.data(), static_cast<std::streamsize>(raw.size())));
  const at::Tensor theirs = at::from_blob(raw.data(), {24, 3, 32, 32}, at::kByte).to(at::kInt);
  const at::Tensor diff = (ours - theirs).abs();
  EXPECT_LE(diff.max().item<int>(), 2);
  EXPECT_LT(diff.to(at::kFloat).mean().item<float>(), 0.1);
}

TEST(CelebaDataset, KeepsTheCentredSquare) {
  // 000001.jpg: rows 20-197 (the centred 178x178 square) are (220, 120, 110), the rows above and
  // below (20, 200, 40); none of the latter may reach the result, whatever the resampling.
  for (const char* resample : {"lanczos", "area"}) {
    for (std::int64_t size : {32, 64}) {
      auto data = open_data("celeba", {{"path", text(celeba.string())}, {"image_size", integer(size)}, {"resample", text(resample)},
                                  {"max_images", integer(1)}});
      const at::Tensor probe = all_bytes(*data)[0].to(at::kInt);
      const at::Tensor centre = at::tensor({220, 120, 110}, at::kInt).view({3, 1, 1});
      EXPECT_LE((probe - centre).abs().max().item<int>(), 2) << resample << " " << size;
    }
  }
}

// Area resampling at an exact ratio (178 -> 89) is the mean of 2x2 blocks of the crop: recomputed
// here from stb_image's decoding of 000002.jpg, to the pixel, so the crop offset is exact too.
TEST(CelebaDataset, AreaResamplingAveragesTheCropsBlocks) {
  int w = 0, h = 0, n = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> pixels(
      stbi_load((celeba / "img_align_celeba" / "000002.jpg").c_str(), &w, &h, &n, 3), stbi_image_free);
  ASSERT_TRUE(pixels);
  ASSERT_EQ(w, 178);
  ASSERT_EQ(h, 218);
  const at::Tensor crop = at::from_blob(pixels.get(), {h, w, 3}, at::kByte).slice(0, 20, 198).permute({2, 0, 1}).to(at::kFloat);
  const at::Tensor expected = at::avg_pool2d(crop.unsqueeze(0), {2, 2}).squeeze(0);
  auto data = open_data("celeba", {{"path", text(celeba.string())}, {"image_size", integer(89)}, {"resample", text("area")},
                              {"max_images", integer(2)}});
  const at::Tensor ours = all_bytes(*data)[1].to(at::kFloat);
  EXPECT_LE((ours - expected).abs().max().item<float>(), 1.0f);  // each pass rounds to 8 bits, as PIL's
}

TEST(CelebaDataset, RefusesUnknownAttributesAndMalformedListsByFileAndLine) {
  std::string error = error_of([] { open_data("celeba", {{"path", text(celeba.string())}, {"attribute", text("Beard")}}); });
  EXPECT_NE(error.find((celeba / "list_attr_celeba.txt").string() + ":2: no attribute 'Beard'"), std::string::npos) << error;
  EXPECT_NE(error.find("Male, Mouth_Slightly_Open"), std::string::npos) << error;
  const fs::path dir = copy_of(celeba, "celeba_lists");
  auto rewrite_line = [](const fs::path& file, std::size_t number, const std::string& text) {
    std::ifstream in(file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    lines.at(number - 1) = text;
    std::ofstream out(file);
    for (const auto& line : lines) out << line << "\n";
  };
  std::string values;  // 39 of the 40: one short
  for (int k = 0; k < 39; ++k) values += k == 20 ? "  1" : " -1";
  rewrite_line(dir / "list_attr_celeba.txt", 7, "000005.jpg" + values);  // one value short
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "list_attr_celeba.txt").string() + ":7: expected an image name and 40 values, found 40 fields"),
            std::string::npos)
      << error;
  rewrite_line(dir / "list_attr_celeba.txt", 7, "000005.jpg" + values + "  2");
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find(":7: expected 1 or -1 for Young, found '2'"), std::string::npos) << error;
  fs::copy_file(celeba / "list_attr_celeba.txt", dir / "list_attr_celeba.txt", fs::copy_options::overwrite_existing);
  rewrite_line(dir / "list_attr_celeba.txt", 1, "202599");
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find(":1: announces 202599 images but the file lists 24"), std::string::npos) << error;
  fs::copy_file(celeba / "list_attr_celeba.txt", dir / "list_attr_celeba.txt", fs::copy_options::overwrite_existing);
  rewrite_line(dir / "list_eval_partition.txt", 3, "000003.jpg train");
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "list_eval_partition.txt").string() + ":3: expected '<image>.jpg 0|1|2'"), std::string::npos) << error;
  rewrite_line(dir / "list_eval_partition.txt", 3, "000099.jpg 0");
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find("000099.jpg is in " + (dir / "list_eval_partition.txt").string() + " but not in"), std::string::npos) << error;
  fs::remove_all(dir);
}

TEST(CelebaDataset, RefusesUnreadableImagesAndIncompleteDownloadsByName) {
  const fs::path dir = copy_of(celeba, "celeba_images");
  std::ofstream(dir / "img_align_celeba" / "000004.jpg", std::ios::binary | std::ios::trunc) << "\xff\xd8\xff\xe0 truncated";
  fs::remove(dir / "img_align_celeba" / "000009.jpg");
  std::string error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "img_align_celeba" / "000004.jpg").string() + ": cannot read the image ("), std::string::npos)
      << error;  // the first bad image in file order, though 000009.jpg is missing too
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}, {"split", text("test")}}); });
  EXPECT_EQ(error, "(no error)");
  fs::remove_all(dir / "img_align_celeba");
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find("img_align_celeba not found (unzip img_align_celeba.zip"), std::string::npos) << error;
  fs::remove(dir / "list_eval_partition.txt");
  error = error_of([&] { open_data("celeba", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find((dir / "list_eval_partition.txt").string() + " not found"), std::string::npos) << error;
  error = error_of([&] { open_data("celeba", {{"path", text(celeba.parent_path().string())}}); });
  EXPECT_NE(error.find("holds celeba/ (torchvision's layout): set path to " + celeba.string()), std::string::npos) << error;
  fs::remove_all(dir);
}

// --- EMNIST through idx --------------------------------------------------------------------------

// EMNIST's files as its archive names them, with images whose pixel (y, x) is 10 y + x: stored
// transposed, as EMNIST stores its letters, pixel (y, x) of the upright image is byte [x][y].
TEST(IdxDataset, EmnistNeedsItsPrefixAndTransposeTurnsItsImagesUpright) {
  const fs::path dir = fs::temp_directory_path() / ("privdiff_benchmark_" + std::to_string(::getpid()) + "_emnist");
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* split : {"train", "test"}) {
    sdk::IdxArray images{{2, 6, 6}, {}}, labels{{2}, {1, 26}};  // letters: classes 1-26
    for (int i = 0; i < 2; ++i) {
      for (int y = 0; y < 6; ++y) {
        for (int x = 0; x < 6; ++x) images.data.push_back(static_cast<std::uint8_t>(10 * y + x + i));
      }
    }
    sdk::write_idx(dir / (std::string("emnist-letters-") + split + "-images-idx3-ubyte.gz"), images);
    sdk::write_idx(dir / (std::string("emnist-letters-") + split + "-labels-idx1-ubyte.gz"), labels);
  }
  const std::string error = error_of([&] { open_data("idx", {{"path", text(dir.string())}}); });
  EXPECT_NE(error.find("train-images-idx3-ubyte[.gz] not found (EMNIST's files are named emnist-<split>-...: set prefix"),
            std::string::npos)
      << error;
  auto stored = open_data("idx", {{"path", text(dir.string())}, {"prefix", text("emnist-letters-")}});
  auto upright = open_data("idx", {{"path", text(dir.string())}, {"prefix", text("emnist-letters-")}, {"split", text("test")},
                              {"transpose", sdk::ConfigValue{true}}});
  EXPECT_EQ(stored->num_classes(), 27);  // class 0 ("N/A") is empty in the letters split
  EXPECT_TRUE(all_labels(*upright).equal(at::tensor({1, 26}, at::kLong)));
  const at::Tensor a = all_bytes(*stored), b = all_bytes(*upright);
  EXPECT_EQ(a[0][0][2][3].item<int>(), 23);
  EXPECT_EQ(b[0][0][2][3].item<int>(), 32);
  EXPECT_TRUE(b.equal(a.transpose(2, 3)));
  fs::remove_all(dir);
}

}  // namespace
