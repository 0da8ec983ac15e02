// IDX reading and the datasets a recipe's [data] section opens.
#include "data/idx_file.hpp"
#include "data/open_dataset.hpp"
#include "test_support.hpp"

#include <privdiff/config/schema.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;
namespace fs = std::filesystem;

namespace {

const fs::path tiny = fixture_path("data/tiny-fashion-mnist");

sdk::Config data_config(std::map<std::string, sdk::ConfigValue> values) {
  sdk::Schema schema;
  schema.add(sdk::Key::string("dataset").optional())
      .add(sdk::Key::string("path").optional())
      .add(sdk::Key::string("split").defaults("train"))
      .add(sdk::Key::integer_list("classes").optional())
      .add(sdk::Key::boolean("public").defaults(false));
  return sdk::make_config(schema, "data", std::move(values));
}

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
  const IdxArray images = read_idx(tiny / "train-images-idx3-ubyte.gz");
  EXPECT_EQ(images.shape, (std::vector<std::int64_t>{20, 28, 28}));
  const IdxArray labels = read_idx(tiny / "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(labels.shape, std::vector<std::int64_t>{20});
  EXPECT_EQ(labels.data[0], 9);  // Fashion-MNIST's first training image is an ankle boot
}

TEST(IdxFile, RoundTripsPlainAndGzip) {
  IdxArray a{{2, 3}, {0, 1, 2, 253, 254, 255}};
  for (const char* name : {"rt.idx", "rt.idx.gz"}) {
    write_idx(temp_file(name), a);
    const IdxArray b = read_idx(temp_file(name));
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
    fs::remove(temp_file(name));
  }
}

TEST(IdxFile, CorruptFilesGiveClearErrors) {
  auto write_bytes = [](const std::string& name, const std::string& bytes) {
    std::ofstream(temp_file(name), std::ios::binary) << bytes;
    return temp_file(name);
  };
  const std::string header = std::string("\0\0\x08\x01\0\0\0\x05", 8);
  EXPECT_NE(error_of([&] { read_idx(write_bytes("t1", header + "abc")); }).find("truncated"), std::string::npos);
  EXPECT_NE(error_of([&] { read_idx(write_bytes("t2", "PK\x03\x04rest")); }).find("not an IDX file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_idx(write_bytes("t3", std::string("\0\0\x0d\x01\0\0\0\x01xxxx", 12))); })
                .find("unsupported IDX element type"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_idx(write_bytes("t4", header + "abcdefgh")); }).find("data after the last value"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_idx(write_bytes("t5", "")); }).find("truncated"), std::string::npos);
  EXPECT_EQ(error_of([] { read_idx("/nonexistent.idx"); }), "/nonexistent.idx: no such file");
  const std::string msg = error_of([&] { read_idx(write_bytes("t1", header + "abc")); });
  EXPECT_EQ(msg.rfind(temp_file("t1").string(), 0), 0u) << msg;  // names the file
  for (const char* n : {"t1", "t2", "t3", "t4", "t5"}) fs::remove(temp_file(n));
}

TEST(OpenDataset, ServesImagesInMinusOneToOneWithLabels) {
  auto data = open_dataset(data_config({{"path", sdk::ConfigValue{tiny.string()}}}));
  EXPECT_EQ(data->size(), 20);
  EXPECT_FALSE(data->is_public());
  const at::Tensor idx = at::arange(20, at::kLong);
  const at::Tensor x = data->images(idx);
  EXPECT_EQ(x.sizes(), (std::vector<std::int64_t>{20, 1, 28, 28}));
  EXPECT_GE(x.min().item<float>(), -1.0f);
  EXPECT_LE(x.max().item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(x.min().item<float>(), -1.0f);
  EXPECT_EQ(data->labels(idx)[0].item<std::int64_t>(), 9);
  EXPECT_EQ(data->num_classes(), 10);
}

TEST(OpenDataset, SplitsClassFiltersAndPublicFlag) {
  auto test_split = open_dataset(data_config({{"path", sdk::ConfigValue{tiny.string()}}, {"split", sdk::ConfigValue{std::string("test")}}}));
  EXPECT_EQ(test_split->size(), 10);
  auto boots = open_dataset(data_config({{"path", sdk::ConfigValue{tiny.string()}},
                                         {"classes", sdk::ConfigValue{std::vector<std::int64_t>{9, 0}}},
                                         {"public", sdk::ConfigValue{true}}}));
  EXPECT_TRUE(boots->is_public());
  const at::Tensor labels = boots->labels(at::arange(boots->size(), at::kLong));
  EXPECT_TRUE(((labels == 9) | (labels == 0)).all().item<bool>());
  EXPECT_GT(boots->size(), 0);
  EXPECT_LT(boots->size(), 20);
}

TEST(OpenDataset, BadDataSaysWhatToDo) {
  EXPECT_NE(error_of([] { open_dataset(data_config({})); }).find("set [data] dataset"), std::string::npos);
  EXPECT_NE(error_of([] { open_dataset(data_config({{"dataset", sdk::ConfigValue{std::string("cifar100")}}})); })
                .find("unknown dataset 'cifar100'"),
            std::string::npos);
  EXPECT_NE(error_of([] { open_dataset(data_config({{"path", sdk::ConfigValue{std::string("/nonexistent")}}})); })
                .find("is not a directory"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              open_dataset(data_config({{"path", sdk::ConfigValue{tiny.string()}},
                                        {"classes", sdk::ConfigValue{std::vector<std::int64_t>{12}}}}));
            }).find("class 12 is not in [0, 10)"),
            std::string::npos);
}

TEST(OpenDataset, FashionMnistResolvesToDebiansPackage) {
  auto data = open_dataset(data_config({{"dataset", sdk::ConfigValue{std::string("fashion-mnist")}},
                                        {"split", sdk::ConfigValue{std::string("test")}}}));
  EXPECT_EQ(data->size(), 10000);
  EXPECT_EQ(data->name(), "fashion-mnist (test)");
}
