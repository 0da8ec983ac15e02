#pragma once
/// @file
/// ImageDataset: labelled (optionally captioned) images held in memory as bytes (60,000 x 28 x 28 is 47 MB), served as
/// float tensors in [-1, 1]. What the in-tree dataset plugins return; out-of-tree ones may too.

#include <privdiff/components/dataset.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace privdiff::sdk {

/// The content of a dataset: uint8 images [N, C, H, W], int64 labels [N] in [0, num_classes) and,
/// for captioned data, N UTF-8 captions (empty: no captions; data/captions.hpp reads them).
struct LabelledBytes {
  at::Tensor images, labels;
  std::int64_t num_classes = 0;
  std::vector<std::string> captions;
};

class PRIVDIFF_SDK_API ImageDataset : public Dataset {
 public:
  /// Throws std::invalid_argument (naming `name`) for mismatched shapes, labels out of range, or a
  /// caption count other than N (or 0).
  ImageDataset(LabelledBytes content, bool is_public, std::string name);
  std::int64_t size() const override;
  at::Tensor images(const at::Tensor& indices) const override;
  at::Tensor labels(const at::Tensor& indices) const override;
  std::int64_t num_classes() const override { return content_.num_classes; }
  bool has_captions() const override { return !content_.captions.empty(); }
  std::vector<std::string> captions(const at::Tensor& indices) const override;
  bool is_public() const override { return public_; }
  std::string name() const override { return name_; }
  const LabelledBytes& content() const { return content_; }

 private:
  LabelledBytes content_;
  bool public_;
  std::string name_;
};

}  // namespace privdiff::sdk
