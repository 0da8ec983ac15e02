#pragma once
// A port's output against its reference's, as the model tests compare them: max |a - b| / max |b|.

#include <ATen/ATen.h>

namespace privdiff::testing {

inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

}  // namespace privdiff::testing
