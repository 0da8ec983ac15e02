// safetensors: read what Python's writer wrote (tests/fixtures/weights/reference.safetensors, made
// by scripts/make_weights_fixtures.sh with the pinned `safetensors`), write the same layout, and
// refuse every kind of damaged file with a message naming the file and what is wrong.
#include <privdiff/io/safetensors.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <unistd.h>
#include <vector>

namespace privdiff::sdk {
namespace {

const std::filesystem::path reference = std::filesystem::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "reference.safetensors";

// The fixture's rule: element i is (i + 1) * step in float64, cast to the dtype.
at::Tensor ramp(at::ScalarType type, std::vector<std::int64_t> shape, double step) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return (at::arange(1, n + 1, at::kDouble) * step).to(type).reshape(shape);
}

std::vector<std::pair<std::string, at::Tensor>> reference_tensors() {
  return {{"f32", ramp(at::kFloat, {2, 3}, 0.25)},
          {"f64", ramp(at::kDouble, {3}, -1.5)},
          {"f16", ramp(at::kHalf, {2, 2}, 0.5)},
          {"bf16", ramp(at::kBFloat16, {2, 2}, 0.75)},
          {"i64", ramp(at::kLong, {2}, -3)},
          {"i32", ramp(at::kInt, {3}, 7)},
          {"i16", ramp(at::kShort, {2}, -2)},
          {"i8", ramp(at::kChar, {4}, 3)},
          {"u8", ramp(at::kByte, {3}, 5)},
          {"bool", at::tensor(std::vector<std::uint8_t>{1, 0, 1}).to(at::kBool)},
          {"empty", at::zeros({0, 3})},
          {"unet.down.0.weight", ramp(at::kFloat, {2, 1, 3, 3}, 0.125)}};
}

const std::map<std::string, std::string> reference_metadata{
    {"format", "pt"}, {"privdiff.fixture", "reference"}, {"note", "\xc3\xbc" "n\xc3\xaf" "code ok"}};

std::string bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

// The message parse_safetensors refuses `bytes` with ("" when it does not).
std::string refusal(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsEveryValueOfPythonsFile) {
  const SafetensorsFile file(reference);
  EXPECT_EQ(file.metadata(), reference_metadata);
  ASSERT_EQ(file.entries().size(), reference_tensors().size());
  for (const auto& [name, expected] : reference_tensors()) {
    SCOPED_TRACE(name);
    const at::Tensor t = file.tensor(name);
    EXPECT_EQ(t.scalar_type(), expected.scalar_type());
    EXPECT_EQ(t.sizes(), expected.sizes());
    EXPECT_TRUE(at::equal(t, expected));
  }
  EXPECT_EQ(file.find("f16")->dtype, "F16");
  EXPECT_EQ(file.find("unet.down.0.weight")->numel(), 18);
  EXPECT_EQ(file.find("missing"), nullptr);
  EXPECT_THROW(file.tensor("missing"), std::out_of_range);
}

TEST(Safetensors, WritesPythonsLayout) {
  const std::string ours = safetensors_bytes(reference_tensors(), reference_metadata);
  const std::string theirs = bytes_of(reference);
  ASSERT_EQ(ours.size(), theirs.size());
  std::uint64_t n = 0;
  std::memcpy(&n, theirs.data(), 8);
  EXPECT_EQ(ours.substr(0, 8), theirs.substr(0, 8));  // the same header length, padding included
  // Python orders the metadata as a hash map does; the tensors' order and offsets are the same.
  EXPECT_EQ(nlohmann::json::parse(ours.substr(8, n)), nlohmann::json::parse(theirs.substr(8, n)));
  EXPECT_EQ(ours.substr(8 + n), theirs.substr(8 + n));  // the data, byte for byte
  EXPECT_EQ(safetensors_bytes(reference_tensors(), reference_metadata), ours);  // deterministic
}

TEST(Safetensors, RoundTripsThroughAFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("privdiff-safetensors-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // Non-contiguous input is written contiguous; tensors read back share the file's pages.
  const at::Tensor transposed = ramp(at::kFloat, {3, 4}, 1.0).t();
  write_safetensors(dir / "w.safetensors", {{"t", transposed}, {"n", at::tensor({2.5})}}, {{"epsilon", "3.0"}});
  {
    const SafetensorsFile file(dir / "w.safetensors");
    EXPECT_TRUE(at::equal(file.tensor("t"), transposed.contiguous()));
    EXPECT_EQ(file.metadata().at("epsilon"), "3.0");
    at::Tensor t = file.tensor("t");
    t.add_(1);  // a private mapping: the file is not changed
    EXPECT_TRUE(at::equal(SafetensorsFile(dir / "w.safetensors").tensor("t"), transposed.contiguous()));
    const auto all = file.tensors();
    EXPECT_EQ(all.size(), 2U);
  }
  EXPECT_EQ(bytes_of(dir / "w.safetensors"),
            safetensors_bytes({{"n", at::tensor({2.5})}, {"t", transposed}}, {{"epsilon", "3.0"}}));
  EXPECT_THROW(SafetensorsFile(dir / "missing.safetensors"), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, RefusesWhatItCannotWrite) {
  EXPECT_THROW(safetensors_bytes({{"a", at::ones({1})}, {"a", at::ones({1})}}), std::invalid_argument);
  EXPECT_THROW(safetensors_bytes({{"", at::ones({1})}}), std::invalid_argument);
  EXPECT_THROW(safetensors_bytes({{"__metadata__", at::ones({1})}}), std::invalid_argument);
  EXPECT_THROW(safetensors_bytes({{"c", at::ones({1}, at::kComplexFloat)}}), std::invalid_argument);
}

TEST(Safetensors, RefusesDamagedFilesSayingWhatIsWrong) {
  const std::string good = bytes_of(reference);
  std::uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  const std::string f32 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\1');
  const std::vector<std::pair<std::string, std::string>> cases{
      {std::string(5, '\0'), "the file is 5 bytes, shorter than the 8-byte header length"},
      {good.substr(0, 8 + n / 2), "runs past the end of the file"},
      {good.substr(0, good.size() - 3), "runs past the data section"},
      {good + "xyz", "the data section has 3 bytes after the last tensor"},
      {with_header(std::string(8, '\xff'), ""), "not valid JSON"},
      {with_header("[1, 2]", ""), "the header is JSON but not an object"},
      {with_header("{" + f32 + "," + f32 + "}", data8), "the header names 'a' twice"},
      {with_header(R"({"a":{"dtype":"F9","shape":[2],"data_offsets":[0,8]}})", data8), "unknown dtype 'F9'"},
      {with_header(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8), "non-negative integers"},
      {with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8), "needs 12 bytes"},
      {with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data8), "end before they begin"},
      {with_header(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", data8),
       "more than 2^64"},
      {with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   data8),
       "overlap"},
      {with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8), "bytes [0, 4) of the data belong to no tensor"},
      {with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", data8), "unknown field 'extra'"},
      {with_header(R"({"__metadata__":{"k":1}})", ""), "__metadata__ 'k' must be a string"},
      {with_header(R"({"a":[1]})", ""), "expected an object"},
  };
  for (const auto& [bytes, expected] : cases) {
    const std::string message = refusal(bytes);
    EXPECT_NE(message.find("bad.safetensors: safetensors: "), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
  }
  // A header length above the reader's limit is refused before anything is read.
  std::string huge(16, '\0');
  const std::uint64_t too_long = 200'000'000;
  std::memcpy(huge.data(), &too_long, 8);
  EXPECT_NE(refusal(huge).find("over the limit"), std::string::npos);
  // A dtype LibTorch lacks opens (inspect can list it) but is refused as a tensor.
  const auto dir = std::filesystem::temp_directory_path();
  const auto path = dir / ("privdiff-f8-" + std::to_string(::getpid()) + ".safetensors");
  {
    std::ofstream out(path, std::ios::binary);
    out << with_header(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "\1\2");
  }
  const SafetensorsFile f8(path);
  EXPECT_EQ(f8.entries().at(0).dtype, "F8_E4M3");
  EXPECT_THROW(f8.tensor("a"), std::runtime_error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace privdiff::sdk
