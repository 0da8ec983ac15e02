#pragma once
/// @file
/// Dataset: the labelled (and possibly captioned) images a stage trains on. A component kind of its own: dataset plugins
/// (plugins/datasets/) build one from a recipe's [data] (or [data.NAME]) section.

#include <privdiff/components/component.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API Dataset : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::dataset;
  ~Dataset() override;
  /// Number of examples N (the denominator of the sampling rate q = batch_size / N).
  virtual std::int64_t size() const = 0;
  /// Images at `indices` (int64, [B]) as float [B, C, H, W] scaled to [-1, 1].
  virtual at::Tensor images(const at::Tensor& indices) const = 0;
  /// Labels at `indices` as int64 [B] in [0, num_classes()).
  virtual at::Tensor labels(const at::Tensor& indices) const = 0;
  virtual std::int64_t num_classes() const = 0;
  /// Whether each record carries a caption: a record is then (image, label, caption), and the
  /// caption is private exactly as the image is (data identity, ledger, release gate). Default: no.
  virtual bool has_captions() const { return false; }
  /// Captions at `indices` (UTF-8, one per index, in order) when has_captions(); empty otherwise.
  virtual std::vector<std::string> captions(const at::Tensor& indices) const { return {}; }
  /// Its privacy status: true for public data (made here, or marked `public = true` by the recipe),
  /// which non-private stages may train on; false for private data, which only mechanisms that
  /// record privacy events may touch.
  virtual bool is_public() const = 0;
  /// For messages, e.g. "fashion-mnist (train)".
  virtual std::string name() const = 0;
};

}  // namespace privdiff::sdk
