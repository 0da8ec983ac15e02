// The IDX sample pair reader's checks, the sample-set writer/reader round trip, and the subset
// `eval --max-samples` scores.
#include <privdiff/data/idx_file.hpp>
#include "evaluate/class_spread_subset.hpp"
#include "evaluate/evaluation.hpp"
#include "sample/sample_set.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

#include <filesystem>

using namespace privdiff::core;
namespace sdk = privdiff::sdk;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("privdiff-eval-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST(SampleSet, WritesAnIdxPairThatReadsBack) {
  const fs::path dir = temp_dir("pair");
  SampleSet set;
  set.images = at::randint(0, 256, {40, 1, 28, 28}, at::kLong).to(at::kByte);
  set.labels = at::arange(40, at::kLong).floor_divide(4);
  const fs::path images = write_sample_set(dir / "s", set, true, 10);
  EXPECT_EQ(images.filename(), "s-images-idx3-ubyte.gz");
  EXPECT_EQ(labels_file_beside(images).filename(), "s-labels-idx1-ubyte.gz");
  EXPECT_TRUE(fs::is_regular_file(dir / "s-grid.png"));
  const sdk::LabelledImages back = read_labelled_images(images, labels_file_beside(images), 10);
  EXPECT_TRUE(back.labels.equal(set.labels));
  EXPECT_TRUE(((back.images + 1) * 127.5).round().to(at::kByte).equal(set.images));
  fs::remove_all(dir);
}

TEST(SampleSet, CarriesItsRunsStampInBothFilesAndStillReadsBack) {
  // A copy of a run's samples is still the run's (privdiff eval): the run travels in the gzip headers.
  const fs::path dir = temp_dir("stamp");
  SampleSet set;
  set.images = at::randint(0, 256, {20, 1, 28, 28}, at::kLong).to(at::kByte);
  set.labels = at::arange(20, at::kLong).floor_divide(2);
  const SampleStamp stamp{"/runs/a \"quoted\" run", "0123456789abcdef"};
  const fs::path images = write_sample_set(dir / "s", set, true, 10, &stamp);
  for (const fs::path& file : {images, labels_file_beside(images)}) {
    const auto back = read_sample_stamp(file);
    ASSERT_TRUE(back) << file;
    EXPECT_EQ(back->run, stamp.run);
    EXPECT_EQ(back->recipe_hash, stamp.recipe_hash);
  }
  const sdk::LabelledImages back = read_labelled_images(images, labels_file_beside(images), 10);
  EXPECT_TRUE(back.labels.equal(set.labels));
  EXPECT_TRUE(((back.images + 1) * 127.5).round().to(at::kByte).equal(set.images));
  // Stamped again (a header that already has a comment): replaced, not added.
  stamp_gzip_file(images, SampleStamp{"/runs/b", ""});
  EXPECT_EQ(read_sample_stamp(images)->run, fs::path("/runs/b"));
  EXPECT_TRUE(read_labelled_images(images, labels_file_beside(images), 10).labels.equal(set.labels));
  // Unstamped sets, and files that are not gzip, have none.
  write_sample_set(dir / "plain", set, true, 10);
  EXPECT_FALSE(read_sample_stamp(dir / "plain-images-idx3-ubyte.gz"));
  EXPECT_FALSE(read_sample_stamp(dir / "s-grid.png"));
  EXPECT_THROW(stamp_gzip_file(dir / "s-grid.png", stamp), std::runtime_error);
  fs::remove_all(dir);
}

TEST(SampleSet, TheGridHasOneClassPerRowAsSamplesPngAlsoForAReleasesFewImagesPerClass) {
  // DP-FETA's central images come query by query (classes 0..9, then 0..9 again): 5 queries of 10
  // classes. Each image is one grey level, its class's, so the grid's pixels say where each went.
  const fs::path dir = temp_dir("grid");
  SampleSet set;
  set.labels = at::arange(50, at::kLong).remainder(10);
  set.images = (set.labels * 20 + 10).to(at::kByte).view({50, 1, 1, 1}).expand({50, 1, 4, 4}).contiguous();
  write_sample_set(dir / "release", set, true, 10);
  int width = 0, height = 0, channels = 0;
  unsigned char* png = stbi_load((dir / "release-grid.png").c_str(), &width, &height, &channels, 1);
  ASSERT_NE(png, nullptr);
  EXPECT_EQ(width, 5 * 4 + 4 * 2);    // 5 columns: the images of one class
  EXPECT_EQ(height, 10 * 4 + 9 * 2);  // 10 rows: the classes
  for (int row = 0; row < 10; ++row) {
    for (int column = 0; column < 5; ++column) {
      EXPECT_EQ(png[(row * 6 + 1) * width + column * 6 + 1], row * 20 + 10) << "row " << row << ", column " << column;
    }
  }
  stbi_image_free(png);
  // A class with fewer images than another: its row is padded with black, the rows stay classes.
  set.labels = at::tensor(std::vector<std::int64_t>{0, 1, 1, 1, 2, 2}, at::kLong);
  set.images = (set.labels * 20 + 10).to(at::kByte).view({6, 1, 1, 1}).expand({6, 1, 4, 4}).contiguous();
  write_sample_set(dir / "uneven", set, true, 3);
  png = stbi_load((dir / "uneven-grid.png").c_str(), &width, &height, &channels, 1);
  ASSERT_NE(png, nullptr);
  EXPECT_EQ(width, 3 * 4 + 2 * 2);
  EXPECT_EQ(height, 3 * 4 + 2 * 2);
  EXPECT_EQ(png[1 * width + 1], 10);
  EXPECT_EQ(png[1 * width + 6 + 1], 0);  // class 0 has one image: black beside it
  EXPECT_EQ(png[7 * width + 12 + 1], 30);
  EXPECT_EQ(png[13 * width + 6 + 1], 50);
  stbi_image_free(png);
  fs::remove_all(dir);
}

TEST(SampleSet, AreRefusedBeforeAllocatingWhenTheyCannotFit) {
  // privdiff sample --count 1000000000000 ended in LibTorch's allocator; the count is checked first.
  const std::string problem = sample_set_too_large(1000000000000, {1, 28, 28}, fs::temp_directory_path());
  EXPECT_NE(problem.find("1000000000000 images of 1x28x28 need 1.58 PB of memory"), std::string::npos) << problem;
  EXPECT_NE(problem.find("785 TB of disk"), std::string::npos) << problem;
  EXPECT_NE(problem.find("an IDX file counts at most 4294967295 images"), std::string::npos) << problem;
  EXPECT_NE(problem.find(" fit; sample fewer"), std::string::npos) << problem;
  EXPECT_EQ(sample_set_too_large(1000, {3, 32, 32}, fs::temp_directory_path()), "");
  EXPECT_EQ(sample_set_too_large(1000, {1, 28, 28}, fs::temp_directory_path() / "not" / "made" / "yet"), "");
}

TEST(SampleSet, MismatchedOrCorruptFilesAreRefusedWithTheFileNamed) {
  const fs::path dir = temp_dir("bad");
  sdk::write_idx(dir / "a-images-idx3-ubyte", sdk::IdxArray{{3, 28, 28}, std::vector<std::uint8_t>(3 * 28 * 28, 7)});
  sdk::write_idx(dir / "a-labels-idx1-ubyte", sdk::IdxArray{{2}, {1, 2}});
  try {
    read_labelled_images(dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", 10);
    FAIL() << "a label count mismatch was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 labels for the 3 images"), std::string::npos) << e.what();
  }
  sdk::write_idx(dir / "a-labels-idx1-ubyte", sdk::IdxArray{{3}, {1, 12, 2}});
  try {
    read_labelled_images(dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", 10);
    FAIL() << "label 12 of 10 classes was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("label 12 at index 1 is not a class (0..9)"), std::string::npos) << e.what();
  }
  fs::resize_file(dir / "a-images-idx3-ubyte", 100);
  try {
    read_labelled_images(dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", 10);
    FAIL() << "a truncated images file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("a-images-idx3-ubyte"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// privdiff sample writes balanced labels in class order: the first 60 of these 200 would be classes
// 0-2 only. The subset must hold every class in its share, each class's first images, in order.
TEST(MaxSamples, SpreadsTheSubsetOverEveryClassOfAClassOrderedSet) {
  sdk::LabelledImages set;
  set.labels = at::arange(200, at::kLong).floor_divide(20);
  set.images = at::arange(200, at::kFloat).view({200, 1, 1, 1});
  const sdk::LabelledImages subset = class_spread_subset(set, 60);
  ASSERT_EQ(subset.count(), 60);
  EXPECT_TRUE(at::bincount(subset.labels, {}, 10).equal(at::full({10}, 6, at::kLong)));
  const at::Tensor index = subset.images.flatten().to(at::kLong);
  EXPECT_TRUE(subset.labels.equal(set.labels.index_select(0, index)));  // images keep their labels
  EXPECT_TRUE((index.remainder(20) < 6).all().item<bool>());             // each class's first six
  EXPECT_TRUE((index.slice(0, 1) > index.slice(0, 0, -1)).all().item<bool>());  // the set's order
  EXPECT_EQ(class_spread_subset(set, 500).count(), 200);  // asking for more keeps all
}

TEST(MaxSamples, TakesEachClassInItsShareOfAnUnevenSet) {
  sdk::LabelledImages set;  // 120 of class 0, 40 of class 1, 40 of class 2
  set.labels = at::cat({at::zeros({120}, at::kLong), at::ones({40}, at::kLong), at::full({40}, 2, at::kLong)});
  set.images = at::zeros({200, 1, 2, 2});
  const at::Tensor counts = at::bincount(class_spread_subset(set, 50).labels, {}, 3);
  EXPECT_EQ(counts.sum().item<std::int64_t>(), 50);
  EXPECT_NEAR(counts[0].item<double>(), 30, 1);
  EXPECT_NEAR(counts[1].item<double>(), 10, 1);
  EXPECT_NEAR(counts[2].item<double>(), 10, 1);
}
