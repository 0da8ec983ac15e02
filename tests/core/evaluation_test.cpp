// The IDX sample pair reader's checks and the sample-set writer/reader round trip.
#include <privdiff/data/idx_file.hpp>
#include "evaluate/evaluation.hpp"
#include "sample/sample_set.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

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
