#pragma once
// The attention every diffusion block here computes (internal to the SDK): for each of `heads` heads
// of width d, softmax(q k^T / sqrt(d)) v, with q [N, L, H d] against k and v [N, M, H d]; the heads'
// results concatenated, [N, L, H d]. The blocks differ only in how they form q, k and v.

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace privdiff::sdk::diffusion {

inline at::Tensor multi_head_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads) {
  const std::int64_t n = q.size(0), l = q.size(1), m = k.size(1), d = q.size(2) / heads;
  const double scale = std::sqrt(static_cast<double>(d));
  if (heads == 1) return at::matmul(at::softmax(at::matmul(q, k.transpose(-1, -2)) / scale, -1), v);
  auto split = [&](const at::Tensor& t, std::int64_t length) { return t.reshape({n, length, heads, d}).transpose(1, 2); };
  const at::Tensor weights = at::softmax(at::matmul(split(q, l), split(k, m).transpose(-1, -2)) / scale, -1);
  return at::matmul(weights, split(v, m)).transpose(1, 2).reshape({n, l, heads * d});
}

}  // namespace privdiff::sdk::diffusion
