#include "data/image_dataset.hpp"

#include "data/pixels.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

namespace privdiff::core {

ImageDataset::ImageDataset(at::Tensor images, at::Tensor labels, std::int64_t num_classes, bool is_public, std::string name)
    : images_(std::move(images)), labels_(std::move(labels)), num_classes_(num_classes), public_(is_public), name_(std::move(name)) {
  if (images_.dim() != 4 || images_.scalar_type() != at::kByte) throw std::invalid_argument(name_ + ": images must be uint8 [N, C, H, W]");
  if (labels_.dim() != 1 || labels_.size(0) != images_.size(0)) {
    throw std::invalid_argument(name_ + ": " + std::to_string(images_.size(0)) + " images but " +
                                std::to_string(labels_.numel()) + " labels");
  }
  if (labels_.numel() > 0 && (labels_.min().item<std::int64_t>() < 0 || labels_.max().item<std::int64_t>() >= num_classes_)) {
    throw std::invalid_argument(name_ + ": labels outside [0, " + std::to_string(num_classes_) + ")");
  }
}

std::int64_t ImageDataset::size() const { return images_.size(0); }

at::Tensor ImageDataset::images(const at::Tensor& indices) const {
  return pixels_from_bytes(images_.index_select(0, indices.to(at::kLong)));
}

at::Tensor ImageDataset::labels(const at::Tensor& indices) const { return labels_.index_select(0, indices.to(at::kLong)); }

ImageDataset ImageDataset::filtered(const std::vector<std::int64_t>& classes) const {
  at::Tensor keep = at::zeros({size()}, at::kBool);
  for (std::int64_t c : classes) {
    if (c < 0 || c >= num_classes_) {
      throw std::invalid_argument("data.classes: class " + std::to_string(c) + " is not in [0, " +
                                  std::to_string(num_classes_) + ")");
    }
    keep = keep | (labels_ == c);
  }
  const at::Tensor idx = at::nonzero(keep).flatten();
  return ImageDataset(images_.index_select(0, idx), labels_.index_select(0, idx), num_classes_, public_, name_);
}

}  // namespace privdiff::core
