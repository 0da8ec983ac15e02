#pragma once
/// @file
/// Dataset: the labelled images a stage trains on, as the host hands them to a mechanism.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace privdiff::sdk {

class PRIVDIFF_SDK_API Dataset {
 public:
  virtual ~Dataset();
  /// Number of examples N (the denominator of the sampling rate q = batch_size / N).
  virtual std::int64_t size() const = 0;
  /// Images at `indices` (int64, [B]) as float [B, C, H, W] scaled to [-1, 1].
  virtual at::Tensor images(const at::Tensor& indices) const = 0;
  /// Labels at `indices` as int64 [B] in [0, num_classes()).
  virtual at::Tensor labels(const at::Tensor& indices) const = 0;
  virtual std::int64_t num_classes() const = 0;
  /// False unless the recipe marked the data `public = true`; private data may only be used by
  /// mechanisms that record privacy events.
  virtual bool is_public() const = 0;
  /// For messages, e.g. "fashion-mnist (train)".
  virtual std::string name() const = 0;
};

}  // namespace privdiff::sdk
