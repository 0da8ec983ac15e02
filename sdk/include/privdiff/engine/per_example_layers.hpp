#pragma once
/// @file
/// Layers with closed-form, batch-vectorised per-example gradients: Linear, Conv2d (any stride,
/// padding, dilation, groups; zero padding), GroupNorm, LayerNorm (over the last dimension) and
/// Embedding. Linear offers ghost norms besides materialised ones; Conv2d ghost and grouped-convolution
/// norms (norm_strategy.hpp; their code is in per_example_norms.cpp). Outside a CaptureSession they are ordinary modules; inside one they record what they
/// need. Frozen parameters (requires_grad == false) cost nothing: a layer with none records nothing.
/// Attention blocks are built from Linear layers plus parameter-free operations.

#include <privdiff/engine/capture.hpp>
#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>

#include <array>
#include <cstdint>
#include <memory>

namespace privdiff::sdk::engine {

/// y = x W^T + b over the last dimension; x: [N, ..., in]. An adapter plugin may add to it
/// (linear_adapter.hpp): y = x W^T + b + delta(x, x W^T + b).
class PRIVDIFF_SDK_API Linear : public torch::nn::Module, public PerExampleLayer {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);
  at::Tensor forward(const at::Tensor& x);
  /// Registers `adapter` as the submodule "adapter". Once per layer (std::invalid_argument otherwise).
  void attach_adapter(std::shared_ptr<LinearAdapter> adapter);
  /// The attached adapter, or null.
  LinearAdapter* adapter() const { return adapter_.get(); }
  /// The weight with the adapter folded in (the weight itself without one).
  at::Tensor merged_weight() const;
  std::vector<at::Tensor> trainable_parameters() const override;
  std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& output_grad,
                                      std::int64_t group) const override;
  std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& output_grad, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override;
  std::vector<NormCandidate> norm_candidates(const CapturedCall& call, std::int64_t group) const override;
  std::vector<at::Tensor> per_example_squared_norms(const CapturedCall& call, const at::Tensor& output_grad,
                                                    std::int64_t group, NormStrategy strategy) const override;
  at::Tensor weight, bias;  ///< [out, in], [out] (bias undefined when disabled)

 private:
  std::shared_ptr<LinearAdapter> adapter_;
};

struct Conv2dOptions {
  std::int64_t in_channels, out_channels;
  std::array<std::int64_t, 2> kernel{3, 3}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

/// 2-D convolution with zero padding; x: [N, C_in, H, W].
class PRIVDIFF_SDK_API Conv2d : public torch::nn::Module, public PerExampleLayer {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  at::Tensor forward(const at::Tensor& x);
  std::vector<at::Tensor> trainable_parameters() const override;
  std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& output_grad,
                                      std::int64_t group) const override;
  std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& output_grad, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override;
  std::vector<NormCandidate> norm_candidates(const CapturedCall& call, std::int64_t group) const override;
  std::vector<at::Tensor> per_example_squared_norms(const CapturedCall& call, const at::Tensor& output_grad,
                                                    std::int64_t group, NormStrategy strategy) const override;
  std::vector<at::Tensor> per_example_by(const CapturedCall& call, const at::Tensor& output_grad, std::int64_t group,
                                         NormStrategy strategy) const override;
  const Conv2dOptions& options() const { return options_; }
  at::Tensor weight, bias;  ///< [C_out, C_in / groups, kh, kw], [C_out]

 private:
  Conv2dOptions options_;
};

/// Group normalisation with a per-channel affine transform; x: [N, C, ...].
class PRIVDIFF_SDK_API GroupNorm : public torch::nn::Module, public PerExampleLayer {
 public:
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5);
  at::Tensor forward(const at::Tensor& x);
  std::vector<at::Tensor> trainable_parameters() const override;
  std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& output_grad,
                                      std::int64_t group) const override;
  std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& output_grad, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override;
  at::Tensor weight, bias;  ///< [C], [C]

 private:
  std::int64_t num_groups_;
  double eps_;
};

/// Layer normalisation over the last dimension with an affine transform; x: [N, ..., D].
class PRIVDIFF_SDK_API LayerNorm : public torch::nn::Module, public PerExampleLayer {
 public:
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5);
  at::Tensor forward(const at::Tensor& x);
  std::vector<at::Tensor> trainable_parameters() const override;
  std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& output_grad,
                                      std::int64_t group) const override;
  std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& output_grad, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override;
  at::Tensor weight, bias;  ///< [D], [D]

 private:
  double eps_;
};

/// Lookup table; indices: int64 [N, ...] -> [N, ..., dim].
class PRIVDIFF_SDK_API Embedding : public torch::nn::Module, public PerExampleLayer {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t dim);
  at::Tensor forward(const at::Tensor& indices);
  std::vector<at::Tensor> trainable_parameters() const override;
  std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& output_grad,
                                      std::int64_t group) const override;
  std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& output_grad, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override;
  at::Tensor weight;  ///< [num_embeddings, dim]
};

}  // namespace privdiff::sdk::engine
