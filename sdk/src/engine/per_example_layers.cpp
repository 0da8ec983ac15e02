#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/engine/per_example_rows.hpp>

#include "conv_patches.hpp"

#include <ATen/ATen.h>
#include <torch/types.h>

#include <cmath>
#include <functional>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

// PyTorch's default initialisation for Linear/Conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void uniform_init(at::Tensor& t, std::int64_t fan_in) {
  torch::NoGradGuard no_grad;
  const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
  t.uniform_(-bound, bound);
}

// Normalisation runs in the parameters' dtype (float32) when a lower-precision forward (bf16
// autocast) hands it bf16 activations, as CUDA's autocast does for its own norm layers.
at::Tensor in_dtype_of(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_floating_point() && x.scalar_type() != weight.scalar_type() ? x.to(weight.scalar_type()) : x;
}

// Affine normalisation layers (GroupNorm, LayerNorm): y = x_hat * weight + bias per channel, so the
// gradients are sum(g * x_hat) and sum(g) over every position of the channel. `channels_view` shows a
// tensor shaped like the layer's output as [rows, channels, positions].
using ChannelsView = std::function<at::Tensor(const at::Tensor&)>;

std::vector<at::Tensor> affine_norm_per_example(const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& x_hat,
                                                const at::Tensor& g, std::int64_t group, const ChannelsView& channels_view) {
  const std::int64_t b = rows_per_example(x_hat, group), c = weight.size(0);
  auto per_example = [&](const at::Tensor& t) { return channels_view(t).sum(2).reshape({b, group, c}).sum(1); };
  std::vector<at::Tensor> out;
  if (is_trainable(weight)) out.push_back(per_example(g * x_hat));
  if (is_trainable(bias)) out.push_back(per_example(g));
  return out;
}

std::vector<at::Tensor> affine_norm_scaled_sum(const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& x_hat,
                                               const at::Tensor& g, std::int64_t group,
                                               const std::vector<at::Tensor>& scales, const ChannelsView& channels_view) {
  // Reduced over positions per row first, then one weighted sum over the rows.
  auto per_row = [&](const at::Tensor& t) { return channels_view(t).sum(2); };
  std::vector<at::Tensor> out;
  std::size_t k = 0;
  if (is_trainable(weight)) out.push_back(weighted_row_sum(per_row(g * x_hat), scales[k++], group));
  if (is_trainable(bias)) out.push_back(weighted_row_sum(per_row(g), scales[k++], group));
  return out;
}

// The recorded input of a GroupNorm / LayerNorm call, normalised without the affine transform.
at::Tensor group_normalised(const at::Tensor& x, std::int64_t groups, double eps) {
  at::NoGradGuard no_grad;
  return at::group_norm(x, groups, {}, {}, eps);
}
at::Tensor layer_normalised(const at::Tensor& x, std::int64_t dim, double eps) {
  at::NoGradGuard no_grad;
  return at::layer_norm(x, {dim}, {}, {}, eps);
}

}  // namespace

// ---------------------------------------------------------------- Linear
Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool with_bias) {
  weight = register_parameter("weight", torch::empty({out_features, in_features}));
  uniform_init(weight, in_features);
  if (with_bias) {
    bias = register_parameter("bias", torch::empty({out_features}));
    uniform_init(bias, in_features);
  }
}

void Linear::attach_adapter(std::shared_ptr<LinearAdapter> adapter) {
  if (adapter_) throw std::invalid_argument("Linear: an adapter was already attached");
  adapter_ = register_module("adapter", std::move(adapter));
}

at::Tensor Linear::merged_weight() const { return adapter_ ? adapter_->merged(weight, bias).first : weight; }

at::Tensor Linear::forward(const at::Tensor& x) {
  if (adapter_ && !is_training() && !CaptureSession::current()) {  // sampling: the adapter folded in
    const auto [w, b] = adapter_->merged(weight, bias);
    return at::linear(x, w, b);
  }
  at::Tensor y = at::linear(x, weight, bias);
  record_if_capturing(this, x, y);
  return adapter_ ? y + adapter_->delta(x, y) : y;
}

std::vector<at::Tensor> Linear::trainable_parameters() const { return trainable_only({weight, bias}); }

std::vector<at::Tensor> Linear::per_example(const CapturedCall& call, const at::Tensor& g, std::int64_t group) const {
  const std::int64_t b = rows_per_example(call.saved, group), in = weight.size(1), out_features = weight.size(0);
  const at::Tensor a = call.saved.reshape({b, -1, in});
  const at::Tensor gg = g.reshape({b, -1, out_features});
  std::vector<at::Tensor> out;
  if (is_trainable(weight)) out.push_back(at::bmm(gg.transpose(1, 2), a));
  if (is_trainable(bias)) out.push_back(gg.sum(1));
  return out;
}

std::vector<at::Tensor> Linear::scaled_sum(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                           const std::vector<at::Tensor>& scales) const {
  const std::int64_t in = weight.size(1), out_features = weight.size(0);
  std::vector<at::Tensor> out;
  std::size_t k = 0;
  if (is_trainable(weight)) {
    const at::Tensor scaled = scale_rows(g, scales[k++], group).reshape({-1, out_features});
    out.push_back(at::mm(scaled.t(), call.saved.reshape({-1, in})));
  }
  if (is_trainable(bias)) out.push_back(weighted_row_sum(g.reshape({g.size(0), -1, out_features}).sum(1), scales[k++], group));
  return out;
}

// ---------------------------------------------------------------- Conv2d
Conv2d::Conv2d(const Conv2dOptions& o) : options_(o) {
  if (o.in_channels % o.groups != 0 || o.out_channels % o.groups != 0) {
    throw std::invalid_argument("Conv2d: channels must be divisible by groups");
  }
  weight = register_parameter("weight", torch::empty({o.out_channels, o.in_channels / o.groups, o.kernel[0], o.kernel[1]}));
  const std::int64_t fan_in = o.in_channels / o.groups * o.kernel[0] * o.kernel[1];
  uniform_init(weight, fan_in);
  if (o.bias) {
    bias = register_parameter("bias", torch::empty({o.out_channels}));
    uniform_init(bias, fan_in);
  }
}

at::Tensor Conv2d::forward(const at::Tensor& x) {
  const auto& o = options_;
  at::Tensor y = at::conv2d(x, weight, bias, o.stride, o.padding, o.dilation, o.groups);
  record_if_capturing(this, x, y);
  return y;
}

std::vector<at::Tensor> Conv2d::trainable_parameters() const { return trainable_only({weight, bias}); }

namespace detail {

at::Tensor conv_patches(const Conv2dOptions& o, const at::Tensor& input, std::int64_t group) {
  const std::int64_t b = rows_per_example(input, group), G = o.groups, c_in = o.in_channels / G;
  // Patches as a strided view of the padded input ([N, C, Ho, Wo, kh, kw] before the dilation
  // slice), copied once into [B, G, c_in * kh * kw, K * L]: faster than at::im2col on CPU.
  const at::Tensor padded = at::constant_pad_nd(input, {o.padding[1], o.padding[1], o.padding[0], o.padding[0]});
  at::Tensor patches = padded.unfold(2, (o.kernel[0] - 1) * o.dilation[0] + 1, o.stride[0])
                           .unfold(3, (o.kernel[1] - 1) * o.dilation[1] + 1, o.stride[1]);
  if (o.dilation[0] > 1) patches = patches.slice(4, 0, c10::nullopt, o.dilation[0]);
  if (o.dilation[1] > 1) patches = patches.slice(5, 0, c10::nullopt, o.dilation[1]);
  const std::int64_t ho = patches.size(2), wo = patches.size(3);
  // [N, C, Ho, Wo, kh, kw] -> [B, K, G, c_in, Ho, Wo, kh, kw] -> [B, G, c_in*kh*kw, K*L]
  return patches.reshape({b, group, G, c_in, ho, wo, o.kernel[0], o.kernel[1]})
      .permute({0, 2, 3, 6, 7, 1, 4, 5})
      .reshape({b, G, c_in * o.kernel[0] * o.kernel[1], -1});
}

at::Tensor conv_output_grad(const Conv2dOptions& o, const at::Tensor& g, std::int64_t group) {
  const std::int64_t b = rows_per_example(g, group), G = o.groups;
  // Output positions of the group's K rows are extra positions of the example: [B, G, c_out, K * L].
  return g.reshape({b, group, G, o.out_channels / G, -1}).permute({0, 2, 3, 1, 4}).reshape({b, G, o.out_channels / G, -1});
}

}  // namespace detail

std::vector<at::Tensor> Conv2d::per_example(const CapturedCall& call, const at::Tensor& g, std::int64_t group) const {
  const auto& o = options_;
  const std::int64_t b = rows_per_example(call.saved, group);
  std::vector<at::Tensor> out;
  const at::Tensor gg = detail::conv_output_grad(o, g, group);
  if (is_trainable(weight)) {
    const at::Tensor a = detail::conv_patches(o, call.saved, group);
    out.push_back(at::matmul(gg, a.transpose(-1, -2))
                      .reshape({b, o.out_channels, o.in_channels / o.groups, o.kernel[0], o.kernel[1]}));
  }
  if (is_trainable(bias)) out.push_back(gg.sum(-1).reshape({b, o.out_channels}));
  return out;
}

std::vector<at::Tensor> Conv2d::scaled_sum(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                           const std::vector<at::Tensor>& scales) const {
  const auto& o = options_;
  std::vector<at::Tensor> out;
  std::size_t k = 0;
  if (is_trainable(weight)) {
    // The library's own (fast) weight-gradient kernel on the rescaled output gradient.
    const at::Tensor gs = scale_rows(g, scales[k++], group);
    out.push_back(std::get<1>(at::convolution_backward(gs, call.saved, weight, c10::nullopt, o.stride, o.padding,
                                                       o.dilation, false, {0, 0}, o.groups, {false, true, false})));
  }
  if (is_trainable(bias)) out.push_back(weighted_row_sum(g.sum({2, 3}), scales[k++], group));
  return out;
}

// ---------------------------------------------------------------- GroupNorm
GroupNorm::GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps)
    : num_groups_(num_groups), eps_(eps) {
  if (num_channels % num_groups != 0) throw std::invalid_argument("GroupNorm: channels must be divisible by groups");
  // eps > 0: the per-example gradients normalise the recorded input again, and a row the engine
  // zeroes (an example with a non-finite norm) must normalise to 0, not 0 / 0.
  if (!(eps > 0)) throw std::invalid_argument("GroupNorm: eps must be > 0");
  weight = register_parameter("weight", torch::ones({num_channels}));
  bias = register_parameter("bias", torch::zeros({num_channels}));
}

at::Tensor GroupNorm::forward(const at::Tensor& input) {
  const at::Tensor x = in_dtype_of(input, weight);
  // The library's fused normalisation with the affine transform (one pass forward and backward, as
  // PyTorch's nn.GroupNorm). The call records its input, which autograd keeps for the backward
  // anyway, not the normalised input: that would be a second tensor of the input's size held until
  // the norms; the per-example gradients normalise it again (per example: a slice of rows normalises
  // as the whole).
  at::Tensor y = at::group_norm(x, num_groups_, weight, bias, eps_);
  record_if_capturing(this, x, y);
  return y;
}



std::vector<at::Tensor> GroupNorm::trainable_parameters() const { return trainable_only({weight, bias}); }

std::vector<at::Tensor> GroupNorm::per_example(const CapturedCall& call, const at::Tensor& g, std::int64_t group) const {
  return affine_norm_per_example(weight, bias, group_normalised(call.saved, num_groups_, eps_), g, group, [c = weight.size(0)](const at::Tensor& t) {
    return t.reshape({t.size(0), c, -1});
  });
}

std::vector<at::Tensor> GroupNorm::scaled_sum(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                              const std::vector<at::Tensor>& scales) const {
  return affine_norm_scaled_sum(weight, bias, group_normalised(call.saved, num_groups_, eps_), g, group, scales, [c = weight.size(0)](const at::Tensor& t) {
    return t.reshape({t.size(0), c, -1});
  });
}

// ---------------------------------------------------------------- LayerNorm
LayerNorm::LayerNorm(std::int64_t dim, double eps) : eps_(eps) {
  if (!(eps > 0)) throw std::invalid_argument("LayerNorm: eps must be > 0 (see GroupNorm)");
  weight = register_parameter("weight", torch::ones({dim}));
  bias = register_parameter("bias", torch::zeros({dim}));
}

at::Tensor LayerNorm::forward(const at::Tensor& input) {
  const at::Tensor x = in_dtype_of(input, weight);
  at::Tensor y = at::layer_norm(x, {weight.size(0)}, weight, bias, eps_);  // fused; the input recorded, as GroupNorm's
  record_if_capturing(this, x, y);
  return y;
}



std::vector<at::Tensor> LayerNorm::trainable_parameters() const { return trainable_only({weight, bias}); }

// The normalised dimension is last: [N, ..., D] -> [N, D, positions].
std::vector<at::Tensor> LayerNorm::per_example(const CapturedCall& call, const at::Tensor& g, std::int64_t group) const {
  return affine_norm_per_example(weight, bias, layer_normalised(call.saved, weight.size(0), eps_), g, group, [d = weight.size(0)](const at::Tensor& t) {
    return t.reshape({t.size(0), -1, d}).transpose(1, 2);
  });
}

std::vector<at::Tensor> LayerNorm::scaled_sum(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                              const std::vector<at::Tensor>& scales) const {
  return affine_norm_scaled_sum(weight, bias, layer_normalised(call.saved, weight.size(0), eps_), g, group, scales, [d = weight.size(0)](const at::Tensor& t) {
    return t.reshape({t.size(0), -1, d}).transpose(1, 2);
  });
}

// ---------------------------------------------------------------- Embedding
Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim) {
  weight = register_parameter("weight", torch::randn({num_embeddings, dim}));
}

at::Tensor Embedding::forward(const at::Tensor& indices) {
  at::Tensor y = at::embedding(weight, indices);
  record_if_capturing(this, indices, y);
  return y;
}

std::vector<at::Tensor> Embedding::trainable_parameters() const { return trainable_only({weight}); }

std::vector<at::Tensor> Embedding::per_example(const CapturedCall& call, const at::Tensor& g, std::int64_t group) const {
  if (!is_trainable(weight)) return {};
  const std::int64_t b = rows_per_example(call.saved, group), d = weight.size(1);
  const at::Tensor idx = call.saved.reshape({b, -1, 1}).expand({b, -1, d});
  return {at::zeros({b, weight.size(0), d}, g.options()).scatter_add_(1, idx, g.reshape({b, -1, d}))};
}

std::vector<at::Tensor> Embedding::scaled_sum(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                              const std::vector<at::Tensor>& scales) const {
  if (!is_trainable(weight)) return {};
  const std::int64_t d = weight.size(1);
  return {at::zeros_like(weight, g.options()).index_add_(0, call.saved.flatten(), scale_rows(g, scales[0], group).reshape({-1, d}))};
}

}  // namespace privdiff::sdk::engine
