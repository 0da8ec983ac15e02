// IDX files (the dataset plugins that read them are tested in tests/plugins/dataset_plugins_test.cpp).
#include <privdiff/data/idx_file.hpp>
#include "test_support.hpp"


#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;
namespace fs = std::filesystem;

namespace {

const fs::path tiny = fixture_path("data/tiny-fashion-mnist");

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

fs::path temp_file(const std::string& name) { return fs::temp_directory_path() / ("privdiff_data_test_" + name); }

}  // namespace

TEST(IdxFile, ReadsTheGzipFixture) {
  const sdk::IdxArray images = sdk::read_idx(tiny / "train-images-idx3-ubyte.gz");
  EXPECT_EQ(images.shape, (std::vector<std::int64_t>{20, 28, 28}));
  const sdk::IdxArray labels = sdk::read_idx(tiny / "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(labels.shape, std::vector<std::int64_t>{20});
  EXPECT_EQ(labels.data[0], 9);  // Fashion-MNIST's first training image is an ankle boot
}

TEST(IdxFile, RoundTripsPlainAndGzip) {
  sdk::IdxArray a{{2, 3}, {0, 1, 2, 253, 254, 255}};
  for (const char* name : {"rt.idx", "rt.idx.gz"}) {
    sdk::write_idx(temp_file(name), a);
    const sdk::IdxArray b = sdk::read_idx(temp_file(name));
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
    fs::remove(temp_file(name));
  }
}

// gunzip -k leaves X and X.gz: read while they hold the same array, refused by name when they differ.
TEST(IdxFile, AFileAndItsGzipThatDifferAreRefused) {
  const fs::path dir = temp_file("both");
  fs::create_directories(dir);
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) fs::copy_file(tiny / f, dir / f, fs::copy_options::overwrite_existing);
  sdk::IdxArray images = sdk::read_idx(tiny / "train-images-idx3-ubyte.gz");
  sdk::write_idx(dir / "train-images-idx3-ubyte", images);
  EXPECT_EQ(sdk::read_idx_split(dir, "train").images.size(0), 20);
  images.data[0] ^= 1;
  sdk::write_idx(dir / "train-images-idx3-ubyte", images);
  const std::string error = error_of([&] { sdk::read_idx_split(dir, "train"); });
  EXPECT_NE(error.find("both exist and hold different data"), std::string::npos) << error;
  fs::remove_all(dir);
}

TEST(IdxFile, CorruptFilesGiveClearErrors) {
  auto write_bytes = [](const std::string& name, const std::string& bytes) {
    std::ofstream(temp_file(name), std::ios::binary) << bytes;
    return temp_file(name);
  };
  const std::string header = std::string("\0\0\x08\x01\0\0\0\x05", 8);
  EXPECT_NE(error_of([&] { sdk::read_idx(write_bytes("t1", header + "abc")); }).find("truncated"), std::string::npos);
  EXPECT_NE(error_of([&] { sdk::read_idx(write_bytes("t2", "PK\x03\x04rest")); }).find("not an IDX file"), std::string::npos);
  EXPECT_NE(error_of([&] { sdk::read_idx(write_bytes("t3", std::string("\0\0\x0d\x01\0\0\0\x01xxxx", 12))); })
                .find("unsupported IDX element type 0x0D"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sdk::read_idx(write_bytes("t4", header + "abcdefgh")); }).find("data after the last value"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sdk::read_idx(write_bytes("t5", "")); }).find("truncated"), std::string::npos);
  EXPECT_EQ(error_of([] { sdk::read_idx("/nonexistent.idx"); }), "/nonexistent.idx: no such file");
  const std::string msg = error_of([&] { sdk::read_idx(write_bytes("t1", header + "abc")); });
  EXPECT_EQ(msg.rfind(temp_file("t1").string(), 0), 0u) << msg;  // names the file
  for (const char* n : {"t1", "t2", "t3", "t4", "t5"}) fs::remove(temp_file(n));
}

// Found by fuzz/idx_fuzzer: a 20-byte file whose header promises 2^32 values made the reader
// allocate 4 GiB before noticing the data was missing. It is refused having read what is there.
TEST(IdxFile, AHeaderThatPromisesMoreThanTheFileHoldsIsRefusedWithoutAllocatingIt) {
  // Rank 3, 65536 x 65536 x 1 unsigned bytes.
  const std::string header = std::string("\0\0\x08\x03" "\0\x01\0\0" "\0\x01\0\0" "\0\0\0\x01", 16);
  std::ofstream(temp_file("promise"), std::ios::binary) << header << "tiny";
  const std::string msg = error_of([&] { sdk::read_idx(temp_file("promise")); });
  EXPECT_NE(msg.find("truncated: the header promises 4294967296 values"), std::string::npos) << msg;
  fs::remove(temp_file("promise"));
}
