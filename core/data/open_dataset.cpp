#include "data/open_dataset.hpp"

#include "data/idx_file.hpp"
#include "data/image_dataset.hpp"

#include <ATen/ATen.h>

#include <filesystem>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// Where Debian's dataset packages put the MNIST family.
fs::path system_location(const std::string& dataset) {
  if (dataset == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (dataset == "mnist") return "/usr/share/datasets/mnist";
  return {};
}

// "<dir>/<stem>" or "<dir>/<stem>.gz", whichever exists.
fs::path find_file(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  for (const fs::path& candidate : {dir / (stem + ".gz"), dir / stem}) {
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  throw std::runtime_error("data: " + (dir / stem).string() + "[.gz] not found");
}

}  // namespace

std::unique_ptr<sdk::Dataset> open_dataset(const sdk::Config& data) {
  if (!data.has("dataset") && !data.has("path")) {
    throw std::runtime_error("data: the recipe's stages need data: set [data] dataset (e.g. \"fashion-mnist\") or path");
  }
  const std::string name = data.has("dataset") ? data.get_string("dataset") : "idx";
  fs::path dir = data.has("path") ? fs::path(data.get_string("path")) : system_location(name);
  if (dir.empty()) {
    throw std::runtime_error("data.dataset: unknown dataset '" + name +
                             "' (known: fashion-mnist, mnist; or give [data] path to a directory of IDX files)");
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error("data: " + dir.string() + " is not a directory" +
                             (name == "fashion-mnist" ? " (install Debian's dataset-fashion-mnist, or set [data] path)" : ""));
  }
  const std::string split = data.get_string("split");
  const std::string prefix = split == "train" ? "train" : "t10k";
  const IdxArray images = read_idx(find_file(dir, prefix + "-images-idx3-ubyte"));
  const IdxArray labels = read_idx(find_file(dir, prefix + "-labels-idx1-ubyte"));
  if (images.shape.size() != 3) throw std::runtime_error("data: the images file is not [N, H, W]");
  if (labels.shape.size() != 1 || labels.shape[0] != images.shape[0]) {
    throw std::runtime_error("data: " + std::to_string(images.shape[0]) + " images but " +
                             std::to_string(labels.shape.empty() ? 0 : labels.shape[0]) + " labels");
  }
  const std::int64_t n = images.shape[0];
  at::Tensor image_tensor = at::empty({n, 1, images.shape[1], images.shape[2]}, at::kByte);
  std::copy(images.data.begin(), images.data.end(), image_tensor.data_ptr<std::uint8_t>());
  at::Tensor label_tensor = at::empty({n}, at::kByte);
  std::copy(labels.data.begin(), labels.data.end(), label_tensor.data_ptr<std::uint8_t>());
  label_tensor = label_tensor.to(at::kLong);
  const std::int64_t num_classes = std::max<std::int64_t>(10, label_tensor.max().item<std::int64_t>() + 1);
  ImageDataset dataset(image_tensor, label_tensor, num_classes, data.get_bool("public"), name + " (" + split + ")");
  if (data.has("classes")) dataset = dataset.filtered(data.get_int_list("classes"));
  if (dataset.size() == 0) throw std::runtime_error("data: no examples left after the class filter");
  return std::make_unique<ImageDataset>(std::move(dataset));
}

}  // namespace privdiff::core
