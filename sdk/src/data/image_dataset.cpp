#include <privdiff/data/image_dataset.hpp>
#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::sdk {

ImageDataset::ImageDataset(LabelledBytes content, bool is_public, std::string name)
    : content_(std::move(content)), public_(is_public), name_(std::move(name)) {
  const at::Tensor& images = content_.images;
  const at::Tensor& labels = content_.labels;
  if (!images.defined() || images.dim() != 4 || images.scalar_type() != at::kByte) {
    throw std::invalid_argument(name_ + ": images must be uint8 [N, C, H, W]");
  }
  if (!labels.defined() || labels.dim() != 1 || labels.size(0) != images.size(0)) {
    throw std::invalid_argument(name_ + ": " + std::to_string(images.size(0)) + " images but " +
                                std::to_string(labels.defined() ? labels.numel() : 0) + " labels");
  }
  content_.labels = labels.to(at::kLong);
  if (content_.labels.numel() > 0 && (content_.labels.min().item<std::int64_t>() < 0 ||
                                      content_.labels.max().item<std::int64_t>() >= content_.num_classes)) {
    throw std::invalid_argument(name_ + ": labels outside [0, " + std::to_string(content_.num_classes) + ")");
  }
  if (!content_.captions.empty() && static_cast<std::int64_t>(content_.captions.size()) != images.size(0)) {
    throw std::invalid_argument(name_ + ": " + std::to_string(images.size(0)) + " images but " +
                                std::to_string(content_.captions.size()) + " captions");
  }
}

std::int64_t ImageDataset::size() const { return content_.images.size(0); }

at::Tensor ImageDataset::images(const at::Tensor& indices) const {
  return pixels_from_bytes(content_.images.index_select(0, indices.to(at::kLong)));
}

at::Tensor ImageDataset::labels(const at::Tensor& indices) const {
  return content_.labels.index_select(0, indices.to(at::kLong));
}

std::vector<std::string> ImageDataset::captions(const at::Tensor& indices) const {
  if (content_.captions.empty()) return {};
  const at::Tensor at_cpu = indices.to(at::kCPU).to(at::kLong).contiguous();
  const std::int64_t* i = at_cpu.data_ptr<std::int64_t>();
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(at_cpu.numel()));
  for (std::int64_t k = 0; k < at_cpu.numel(); ++k) {
    if (i[k] < 0 || i[k] >= size()) throw std::out_of_range(name_ + ": record " + std::to_string(i[k]) + " out of range");
    out.push_back(content_.captions[static_cast<std::size_t>(i[k])]);
  }
  return out;
}

}  // namespace privdiff::sdk
