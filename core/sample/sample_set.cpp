#include "sample/sample_set.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>
#include "util/image_grid.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

std::int64_t model_classes(const sdk::Config& model_config) {
  return model_config.has("num_classes") ? model_config.get_int("num_classes") : 0;
}

SampleSet generate_samples(sdk::Model& model, sdk::Sampler& sampler, const SampleOptions& options, std::ostream& log) {
  if (options.count < 1) throw std::invalid_argument("sample count must be >= 1");
  SampleSet set;
  if (options.num_classes > 0) {
    if (options.balanced) {
      set.labels = at::arange(options.count, at::kLong).floor_divide(
          (options.count + options.num_classes - 1) / options.num_classes);
    } else {
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed ^ 0x6c6162656c73ULL);
      set.labels = at::randint(options.num_classes, {options.count}, generator, at::kLong);
    }
  }
  model.module().eval();
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> batches;
  const auto start = std::chrono::steady_clock::now();
  auto last_print = start;
  for (std::int64_t done = 0, batch = 0; done < options.count; ++batch) {
    const std::int64_t n = std::min(options.batch_size, options.count - done);
    sdk::SampleRequest request;
    request.count = n;
    if (set.labels.defined()) request.labels = set.labels.narrow(0, done, n);
    request.seed = options.seed + static_cast<std::uint64_t>(batch) * 0x9e3779b97f4a7c15ULL;
    const at::Tensor images = model.decode(sampler.sample(model, request)).to(at::kCPU);
    batches.push_back(sdk::pixels_to_bytes(images));
    done += n;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_print > std::chrono::seconds(2) || done == options.count) {
      last_print = now;
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const double rate = done / std::max(elapsed, 1e-9);
      log << "  sampled " << done << "/" << options.count << "  " << std::setprecision(3) << rate << " images/s  ETA "
          << std::setprecision(3) << (options.count - done) / rate << " s\n" << std::flush;
    }
  }
  set.images = at::cat(batches, 0);
  return set;
}

namespace {

sdk::IdxArray to_idx(const at::Tensor& bytes, std::vector<std::int64_t> shape) {
  const at::Tensor contiguous = bytes.contiguous();
  sdk::IdxArray array;
  array.shape = std::move(shape);
  const auto* data = contiguous.data_ptr<std::uint8_t>();
  array.data.assign(data, data + contiguous.numel());
  return array;
}

}  // namespace

fs::path write_sample_set(const fs::path& prefix, const SampleSet& set, bool balanced, std::int64_t num_classes) {
  if (!prefix.parent_path().empty()) fs::create_directories(prefix.parent_path());
  const fs::path images_file = prefix.string() + "-images-idx3-ubyte.gz";
  std::vector<std::int64_t> shape = set.images.sizes().vec();
  if (shape.size() == 4 && shape[1] == 1) shape.erase(shape.begin() + 1);
  sdk::write_idx(images_file, to_idx(set.images, shape));
  if (set.labels.defined()) {
    sdk::write_idx(labels_file_beside(images_file), to_idx(set.labels.to(at::kByte), {set.labels.size(0)}));
  }
  // A preview grid: for balanced labels up to 10 of each of the first 10 classes, one class per row.
  at::Tensor preview;
  std::int64_t rows = 0;
  if (balanced && set.labels.defined() && num_classes > 0) {
    std::vector<at::Tensor> per_class;
    for (std::int64_t c = 0; c < std::min<std::int64_t>(num_classes, 10); ++c) {
      const at::Tensor index = (set.labels == c).nonzero().flatten();
      if (index.numel() >= 10) per_class.push_back(set.images.index_select(0, index.narrow(0, 0, 10)));
    }
    if (!per_class.empty()) {
      preview = at::cat(per_class, 0);
      rows = static_cast<std::int64_t>(per_class.size());
    }
  }
  std::int64_t columns = 10;
  if (!preview.defined() && set.images.size(0) > 0) {  // the first rows of 10 (fewer than 10: one row)
    columns = std::min<std::int64_t>(10, set.images.size(0));
    rows = std::min<std::int64_t>(10, set.images.size(0) / columns);
    preview = set.images.narrow(0, 0, rows * columns);
  }
  if (preview.defined()) {
    write_image_grid(prefix.string() + "-grid.png", sdk::pixels_from_bytes(preview), rows, columns);
  }
  return images_file;
}

fs::path labels_file_beside(const fs::path& images_file) {
  std::string name = images_file.filename().string();
  const auto at = name.rfind("images-idx3-ubyte");
  if (at == std::string::npos) return {};
  name.replace(at, 17, "labels-idx1-ubyte");
  return images_file.parent_path() / name;
}

}  // namespace privdiff::core
