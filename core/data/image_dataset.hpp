#pragma once
// Labelled grayscale images held in memory as bytes (60,000 x 28 x 28 is 47 MB), served as float
// tensors in [-1, 1].

#include <privdiff/data/dataset.hpp>

#include <ATen/core/Tensor.h>

#include <string>

namespace privdiff::core {

class ImageDataset : public sdk::Dataset {
 public:
  /// images: uint8 [N, C, H, W]; labels: int64 [N] in [0, num_classes).
  ImageDataset(at::Tensor images, at::Tensor labels, std::int64_t num_classes, bool is_public, std::string name);
  std::int64_t size() const override;
  at::Tensor images(const at::Tensor& indices) const override;
  at::Tensor labels(const at::Tensor& indices) const override;
  std::int64_t num_classes() const override { return num_classes_; }
  bool is_public() const override { return public_; }
  std::string name() const override { return name_; }
  /// The subset whose labels are in `classes` (labels keep their values).
  ImageDataset filtered(const std::vector<std::int64_t>& classes) const;

 private:
  at::Tensor images_, labels_;
  std::int64_t num_classes_;
  bool public_;
  std::string name_;
};

}  // namespace privdiff::core
