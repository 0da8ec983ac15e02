// cifar10: CIFAR-10 as its authors distribute the *binary version* (cifar-10-batches-bin/):
// data_batch_1.bin .. data_batch_5.bin (train) and test_batch.bin (test). Each record is 3,073
// bytes: the label (0-9), then the 32x32 image as 1,024 red, 1,024 green and 1,024 blue bytes,
// each plane row-major, which is already the [3, 32, 32] layout the images are served in.
// Like DPImageBench (data/preprocess_dataset.py), the images are used as stored: no resize.
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::plugins::cifar10 {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kSide = 32, kChannels = 3, kClasses = 10;
constexpr std::int64_t kImageBytes = kChannels * kSide * kSide;
constexpr std::int64_t kRecordBytes = 1 + kImageBytes;

std::vector<std::string> batch_files(const std::string& split) {
  if (split == "test") return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"};
}

// The same data ships in three versions and people often download the first one they see:
// refuse the other two by name rather than as "data_batch_1.bin not found".
void refuse_other_versions(const fs::path& dir) {
  std::error_code ec;
  const std::string advice = "; download the binary version (cifar-10-binary.tar.gz) and set path to its "
                             "cifar-10-batches-bin directory";
  if (fs::is_regular_file(dir / "data_batch_1", ec)) {
    throw std::runtime_error(dir.string() + " holds data_batch_1 without .bin: this is the python version of "
                             "CIFAR-10 (pickled batches)" + advice);
  }
  if (fs::is_regular_file(dir / "data_batch_1.mat", ec)) {
    throw std::runtime_error(dir.string() + " holds data_batch_1.mat: this is the MATLAB version of CIFAR-10" + advice);
  }
}

fs::path checked_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir.string() + " is not a directory");
  refuse_other_versions(dir);
  // Pointing at the folder the archive was unpacked into is the usual slip: say where the files are.
  if (!fs::exists(dir / "data_batch_1.bin", ec) && fs::is_directory(dir / "cifar-10-batches-bin", ec)) {
    throw std::runtime_error(dir.string() + " holds cifar-10-batches-bin/: set path to " +
                             (dir / "cifar-10-batches-bin").string());
  }
  if (!fs::exists(dir / "data_batch_1.bin", ec) && fs::is_regular_file(dir / "train.bin", ec)) {
    throw std::runtime_error(dir.string() + " holds train.bin: this looks like CIFAR-100 (the cifar10 plugin reads "
                             "CIFAR-10's data_batch_1.bin .. data_batch_5.bin and test_batch.bin)");
  }
  return dir;
}

// Appends the records of one batch file to `images` (3,072 bytes each) and `labels`.
void read_batch(const fs::path& file, std::vector<std::uint8_t>& images, std::vector<std::int64_t>& labels) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw std::runtime_error(file.string() + ": batch file not found");
  const auto size = static_cast<std::int64_t>(fs::file_size(file, ec));
  if (ec) throw std::runtime_error(file.string() + ": cannot read its size (" + ec.message() + ")");
  if (size == 0 || size % kRecordBytes != 0) {
    throw std::runtime_error(file.string() + ": " + std::to_string(size) + " bytes, expected a positive multiple of " +
                             std::to_string(kRecordBytes) + " (1 label byte + 3,072 pixel bytes per record); "
                             "truncated, or not a CIFAR-10 binary batch");
  }
  std::vector<char> bytes(static_cast<std::size_t>(size));
  std::ifstream in(file, std::ios::binary);
  if (!in.read(bytes.data(), size)) throw std::runtime_error(file.string() + ": read failed");
  const std::int64_t records = size / kRecordBytes;
  const std::size_t first_image = images.size();
  images.resize(first_image + static_cast<std::size_t>(records * kImageBytes));
  for (std::int64_t r = 0; r < records; ++r) {
    const char* record = bytes.data() + r * kRecordBytes;
    const auto label = static_cast<std::uint8_t>(record[0]);
    if (label >= kClasses) {
      throw std::runtime_error(file.string() + ": record " + std::to_string(r) + " has label " + std::to_string(label) +
                               ", expected 0-9");
    }
    labels.push_back(label);
    std::memcpy(images.data() + first_image + static_cast<std::size_t>(r * kImageBytes), record + 1, kImageBytes);
  }
}

// A batch file cut at a record boundary reads as a whole one: the data batches hold the same number
// of records (10,000 each in the official files), so one that holds fewer than another is truncated.
void check_same_records(const fs::path& dir, const std::vector<std::string>& names,
                        const std::vector<std::int64_t>& records) {
  std::size_t most = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    if (records[i] > records[most]) most = i;
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i] == records[most]) continue;
    throw std::runtime_error((dir / names[i]).string() + ": " + std::to_string(records[i]) + " records, but " +
                             names[most] + " holds " + std::to_string(records[most]) + ": the five data batches hold "
                             "the same number (10,000 each in the official files), so this one is truncated; unpack "
                             "cifar-10-binary.tar.gz again");
  }
}

LabelledBytes read(const Config& c) {
  const fs::path dir = checked_directory(c.get_string("path"));
  std::vector<std::uint8_t> images;
  std::vector<std::int64_t> labels;
  const std::vector<std::string> names = batch_files(c.get_string("split"));
  std::vector<std::int64_t> records;
  for (const std::string& name : names) {
    const std::size_t before = labels.size();
    read_batch(dir / name, images, labels);
    records.push_back(static_cast<std::int64_t>(labels.size() - before));
  }
  check_same_records(dir, names, records);
  const auto n = static_cast<std::int64_t>(labels.size());
  LabelledBytes out;
  out.images = at::empty({n, kChannels, kSide, kSide}, at::kByte);
  std::memcpy(out.images.data_ptr<std::uint8_t>(), images.data(), images.size());
  out.labels = at::tensor(labels, at::kLong);
  out.num_classes = kClasses;
  return out;
}

}  // namespace

class Cifar10Dataset : public ImageDataset {
 public:
  explicit Cifar10Dataset(const Config& c) : ImageDataset(read(c), c.get_bool("public"), "cifar10 (" + c.get_string("split") + ")") {}
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Cifar10Dataset>(
      "cifar10", "CIFAR-10, binary version (cifar-10-batches-bin), 32x32 RGB, 10 classes",
      Schema{}
          .add(Key::string("path").doc("the cifar-10-batches-bin directory (data_batch_1.bin .. data_batch_5.bin, "
                                       "test_batch.bin) of cifar-10-binary.tar.gz"))
          .add(Key::string("split").one_of({"train", "test"}).defaults("train")
                   .doc("train: the five data batches in order (50,000 images); test: test_batch (10,000)"))
          .add(Key::boolean("public").defaults(false)
                   .doc("true marks the data as public: non-private stages may train on it")));
}
}  // namespace

}  // namespace privdiff::plugins::cifar10

PRIVDIFF_PLUGIN("cifar10", "0.1.0", "CIFAR-10 (binary version)", privdiff::plugins::cifar10::register_components)
