#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::engine {

namespace {

bool trainable(const at::Tensor& p) { return p.defined() && p.requires_grad(); }

// Records the call when a session is active, gradients are on, and the layer has anything to train.
void maybe_record(PerExampleLayer* layer, const at::Tensor& saved, const at::Tensor& output) {
  CaptureSession* session = CaptureSession::current();
  if (!session || !at::GradMode::is_enabled() || layer->trainable_parameters().empty()) return;
  session->record(layer, saved.detach(), output);
}

std::vector<at::Tensor> trainable_of(std::initializer_list<at::Tensor> params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) {
    if (trainable(p)) out.push_back(p);
  }
  return out;
}

// PyTorch's default initialisation for Linear/Conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void uniform_init(at::Tensor& t, std::int64_t fan_in) {
  torch::NoGradGuard no_grad;
  const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
  t.uniform_(-bound, bound);
}

// Shape [1, C, 1, ...] to broadcast a per-channel vector over x.
std::vector<std::int64_t> channel_shape(const at::Tensor& x) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return shape;
}

std::int64_t examples(const at::Tensor& rows, std::int64_t group) {
  if (rows.size(0) % group != 0) {
    throw std::invalid_argument("per-example gradients: " + std::to_string(rows.size(0)) +
                                " rows are not a multiple of the group size " + std::to_string(group));
  }
  return rows.size(0) / group;
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

at::Tensor Linear::forward(const at::Tensor& x) {
  at::Tensor y = at::linear(x, weight, bias);
  maybe_record(this, x, y);
  return y;
}

std::vector<at::Tensor> Linear::trainable_parameters() const { return trainable_of({weight, bias}); }

void Linear::accumulate(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                        std::vector<at::Tensor>& grads) const {
  const std::int64_t b = examples(call.saved, group);
  const at::Tensor a = call.saved.reshape({b, -1, weight.size(1)});
  const at::Tensor gg = g.reshape({b, -1, weight.size(0)});
  std::size_t k = 0;
  if (trainable(weight)) grads[k++].add_(at::bmm(gg.transpose(1, 2), a));
  if (trainable(bias)) grads[k++].add_(gg.sum(1));
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
  maybe_record(this, x, y);
  return y;
}

std::vector<at::Tensor> Conv2d::trainable_parameters() const { return trainable_of({weight, bias}); }

void Conv2d::accumulate(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                        std::vector<at::Tensor>& grads) const {
  const auto& o = options_;
  const std::int64_t b = examples(call.saved, group);
  const std::int64_t G = o.groups, c_out = o.out_channels / G;
  std::size_t k = 0;
  // Output positions of the group's K rows are extra positions of the example: [B, G, ., K * L].
  const at::Tensor gg = g.reshape({b, group, G, c_out, -1}).permute({0, 2, 3, 1, 4}).reshape({b, G, c_out, -1});
  if (trainable(weight)) {
    const at::Tensor unfolded = at::im2col(call.saved, o.kernel, o.dilation, o.padding, o.stride);  // [N, C_in*kh*kw, L]
    const std::int64_t patch = unfolded.size(1) / G;
    const at::Tensor a = unfolded.reshape({b, group, G, patch, -1}).permute({0, 2, 3, 1, 4}).reshape({b, G, patch, -1});
    grads[k++].add_(at::matmul(gg, a.transpose(-1, -2)).reshape({b, o.out_channels, o.in_channels / G, o.kernel[0], o.kernel[1]}));
  }
  if (trainable(bias)) grads[k++].add_(gg.sum(-1).reshape({b, o.out_channels}));
}

// ---------------------------------------------------------------- GroupNorm
GroupNorm::GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps)
    : num_groups_(num_groups), eps_(eps) {
  if (num_channels % num_groups != 0) throw std::invalid_argument("GroupNorm: channels must be divisible by groups");
  weight = register_parameter("weight", torch::ones({num_channels}));
  bias = register_parameter("bias", torch::zeros({num_channels}));
}

at::Tensor GroupNorm::forward(const at::Tensor& x) {
  const at::Tensor normalised = at::group_norm(x, num_groups_, {}, {}, eps_);
  const auto shape = channel_shape(x);
  at::Tensor y = normalised * weight.view(shape) + bias.view(shape);
  maybe_record(this, normalised, y);
  return y;
}

std::vector<at::Tensor> GroupNorm::trainable_parameters() const { return trainable_of({weight, bias}); }

void GroupNorm::accumulate(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                           std::vector<at::Tensor>& grads) const {
  const std::int64_t b = examples(call.saved, group), c = weight.size(0);
  std::size_t k = 0;
  if (trainable(weight)) grads[k++].add_((g * call.saved).reshape({b, group, c, -1}).sum({1, 3}));
  if (trainable(bias)) grads[k++].add_(g.reshape({b, group, c, -1}).sum({1, 3}));
}

// ---------------------------------------------------------------- LayerNorm
LayerNorm::LayerNorm(std::int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
  bias = register_parameter("bias", torch::zeros({dim}));
}

at::Tensor LayerNorm::forward(const at::Tensor& x) {
  const at::Tensor normalised = at::layer_norm(x, {weight.size(0)}, {}, {}, eps_);
  at::Tensor y = normalised * weight + bias;
  maybe_record(this, normalised, y);
  return y;
}

std::vector<at::Tensor> LayerNorm::trainable_parameters() const { return trainable_of({weight, bias}); }

void LayerNorm::accumulate(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                           std::vector<at::Tensor>& grads) const {
  const std::int64_t b = examples(call.saved, group), d = weight.size(0);
  std::size_t k = 0;
  if (trainable(weight)) grads[k++].add_((g * call.saved).reshape({b, -1, d}).sum(1));
  if (trainable(bias)) grads[k++].add_(g.reshape({b, -1, d}).sum(1));
}

// ---------------------------------------------------------------- Embedding
Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim) {
  weight = register_parameter("weight", torch::randn({num_embeddings, dim}));
}

at::Tensor Embedding::forward(const at::Tensor& indices) {
  at::Tensor y = at::embedding(weight, indices);
  maybe_record(this, indices, y);
  return y;
}

std::vector<at::Tensor> Embedding::trainable_parameters() const { return trainable_of({weight}); }

void Embedding::accumulate(const CapturedCall& call, const at::Tensor& g, std::int64_t group,
                           std::vector<at::Tensor>& grads) const {
  if (!trainable(weight)) return;
  const std::int64_t b = examples(call.saved, group), d = weight.size(1);
  const at::Tensor idx = call.saved.reshape({b, -1, 1}).expand({b, -1, d});
  grads[0].scatter_add_(1, idx, g.reshape({b, -1, d}));
}

}  // namespace privdiff::sdk::engine
