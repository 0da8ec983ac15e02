#include "sample/sample_set.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>
#include <privdiff/io/atomic_file.hpp>
#include "util/image_grid.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

std::int64_t model_classes(const sdk::Config& model_config) {
  return model_config.has("num_classes") ? model_config.get_int("num_classes") : 0;
}

namespace {

// "785 TB": three significant digits, decimal units.
std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 6) {
    bytes /= 1000;
    ++unit;
  }
  std::ostringstream out;
  out << std::setprecision(3) << bytes << " " << units[unit];
  return out.str();
}

// The free space where `directory` is (or would be created).
std::optional<double> free_bytes(fs::path directory) {
  std::error_code ec;
  directory = fs::absolute(directory, ec);
  while (!directory.empty() && !fs::exists(directory, ec) && directory != directory.parent_path()) {
    directory = directory.parent_path();
  }
  const fs::space_info space = fs::space(directory, ec);
  if (ec) return std::nullopt;
  return static_cast<double>(space.available);
}

}  // namespace

std::string sample_set_too_large(std::int64_t count, const std::vector<std::int64_t>& image_shape,
                                 const fs::path& directory) {
  double image_bytes = 1;
  std::string shape;
  for (std::int64_t d : image_shape) {
    image_bytes *= static_cast<double>(d);
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  }
  constexpr double idx_limit = 4294967295.0;  // an IDX dimension is a 32-bit count
  const double memory_per_image = 2 * image_bytes + 16;  // the batches and their concatenation; labels
  const double disk_per_image = image_bytes + 1;
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  const std::optional<double> disk = free_bytes(directory);
  const double n = static_cast<double>(count);
  const bool too_many = n > idx_limit, no_memory = n * memory_per_image > memory,
             no_disk = disk && n * disk_per_image > *disk;
  if (!too_many && !no_memory && !no_disk) return "";
  double fits = std::min(idx_limit, std::floor(memory / memory_per_image));
  if (disk) fits = std::min(fits, std::floor(*disk / disk_per_image));
  std::ostringstream out;
  out << count << " images of " << shape << " need " << format_bytes(n * memory_per_image)
      << " of memory while they are written (" << format_bytes(memory_per_image) << " each) and "
      << format_bytes(n * disk_per_image) << " of disk (uncompressed); this machine has " << format_bytes(memory)
      << " of memory";
  if (disk) out << " and " << format_bytes(*disk) << " free under " << directory.string();
  if (too_many) out << ", and an IDX file counts at most 4294967295 images";
  out << ": at most " << static_cast<std::int64_t>(fits) << " fit; sample fewer (several sets with different seeds "
      << "give more)";
  return out.str();
}

SampleSet generate_samples(sdk::Model& model, sdk::Sampler& sampler, const SampleOptions& options, std::ostream& log) {
  if (options.count < 1) throw std::invalid_argument("sample count must be >= 1");
  SampleSet set;
  if (options.num_classes > 0 && !options.labels_from_prompts) {
    if (options.balanced) {
      set.labels = at::arange(options.count, at::kLong).floor_divide(
          (options.count + options.num_classes - 1) / options.num_classes);
    } else {
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed ^ 0x6c6162656c73ULL);
      set.labels = at::randint(options.num_classes, {options.count}, generator, at::kLong);
    }
  }
  const auto prompts = static_cast<std::int64_t>(options.prompts.size());
  if (options.labels_from_prompts && prompts == 0) throw std::invalid_argument("samples labelled by prompt need prompts");
  std::vector<std::int64_t> prompt_of;  // each sample's prompt
  for (std::int64_t i = 0; i < options.count && prompts > 0; ++i) {
    prompt_of.push_back(i * prompts / options.count);
    set.prompts.push_back(options.prompts[static_cast<std::size_t>(prompt_of.back())]);
  }
  if (options.labels_from_prompts) set.labels = at::tensor(prompt_of, at::kLong);
  const bool model_labels = set.labels.defined() && (!options.labels_from_prompts || options.num_classes > 0);
  model.module().eval();
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> batches;
  const auto start = std::chrono::steady_clock::now();
  auto last_print = start;
  for (std::int64_t done = 0, batch = 0; done < options.count; ++batch) {
    const std::int64_t n = std::min(options.batch_size, options.count - done);
    sdk::SampleRequest request;
    request.count = n;
    if (model_labels) request.labels = set.labels.narrow(0, done, n);
    if (!set.prompts.empty()) request.captions.assign(set.prompts.begin() + done, set.prompts.begin() + done + n);
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

fs::path write_sample_set(const fs::path& prefix, const SampleSet& set, bool class_rows, std::int64_t num_classes,
                          const SampleStamp* stamp) {
  if (!prefix.parent_path().empty()) fs::create_directories(prefix.parent_path());
  const fs::path images_file = prefix.string() + "-images-idx3-ubyte.gz";
  std::vector<std::int64_t> shape = set.images.sizes().vec();
  if (shape.size() == 4 && shape[1] == 1) shape.erase(shape.begin() + 1);
  sdk::write_idx(images_file, to_idx(set.images, shape));
  if (set.labels.defined()) {
    sdk::write_idx(labels_file_beside(images_file), to_idx(set.labels.to(at::kByte), {set.labels.size(0)}));
  }
  if (stamp) {
    stamp_gzip_file(images_file, *stamp);
    if (set.labels.defined()) stamp_gzip_file(labels_file_beside(images_file), *stamp);
  }
  const bool any_prompt = std::any_of(set.prompts.begin(), set.prompts.end(), [](const auto& p) { return !p.empty(); });
  if (any_prompt) {  // (not for the empty caption alone: a text model's unconditional samples)
    std::string lines;
    for (const auto& p : set.prompts) lines += p + "\n";
    sdk::write_file_atomically(prefix.string() + "-prompts.txt", lines);
  }
  // A preview grid, one class per row as samples.png: up to 10 images of each of the first 10 classes
  // (a class with fewer, e.g. a release of 5 per class, has a shorter row, padded with black).
  at::Tensor preview;
  std::int64_t rows = 0, columns = 0;
  if (class_rows && set.labels.defined() && num_classes > 0) {
    std::vector<at::Tensor> per_class;
    for (std::int64_t c = 0; c < std::min<std::int64_t>(num_classes, 10); ++c) {
      const at::Tensor index = (set.labels == c).nonzero().flatten();
      if (index.numel() == 0) continue;
      per_class.push_back(set.images.index_select(0, index.narrow(0, 0, std::min<std::int64_t>(10, index.numel()))));
      columns = std::max(columns, per_class.back().size(0));
    }
    for (auto& row : per_class) {
      if (row.size(0) == columns) continue;
      auto padding = row.sizes().vec();
      padding[0] = columns - row.size(0);
      row = at::cat({row, at::zeros(padding, row.options())});
    }
    if (!per_class.empty()) {
      preview = at::cat(per_class, 0);
      rows = static_cast<std::int64_t>(per_class.size());
    }
  }
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

fs::path prompts_file_beside(const fs::path& images_file) {
  const std::string name = images_file.filename().string();
  const auto at = name.rfind("-images-idx3-ubyte");
  if (at == std::string::npos) return {};
  return images_file.parent_path() / (name.substr(0, at) + "-prompts.txt");
}

std::vector<std::string> prompts_beside(const fs::path& images_file, std::int64_t count) {
  const fs::path file = prompts_file_beside(images_file);
  std::error_code ec;
  if (file.empty() || !fs::is_regular_file(file, ec)) return {};
  std::vector<std::string> out;
  std::istringstream in(sdk::read_file(file));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  if (static_cast<std::int64_t>(out.size()) != count) {
    throw std::invalid_argument(file.string() + ": " + std::to_string(out.size()) + " prompts for " + std::to_string(count) +
                                " images (the prompts file privdiff sample wrote beside them, one a line)");
  }
  return out;
}

}  // namespace privdiff::core
