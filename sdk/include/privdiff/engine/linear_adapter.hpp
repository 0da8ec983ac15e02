#pragma once
/// @file
/// The layer-level side of an adapter plugin (components/adapter.hpp): what it adds to one
/// engine::Linear. An adapted layer computes y = W x + b + delta(x, W x + b); the adapter is a module of
/// its own, registered under the layer as "adapter" (so its parameters save, load and move with the
/// model: "down1_attn0.qkv.adapter.lora_A"), and a per-example layer of its own: delta() records what
/// its closed-form per-example gradients need, so clipping covers it like any other layer. For sampling
/// the layer folds it in (merged()) and computes one product.

#include <privdiff/engine/capture.hpp>
#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace privdiff::sdk::engine {

class Linear;

class PRIVDIFF_SDK_API LinearAdapter : public torch::nn::Module, public PerExampleLayer {
 public:
  ~LinearAdapter() override;
  /// What the adapter adds to the layer's output, from the layer's input x [N, ..., in] and its
  /// base output W x + b [N, ..., out]; called in training mode and whenever gradients are captured.
  /// It must record its call (record_if_capturing) with its own output as the call's output.
  virtual at::Tensor delta(const at::Tensor& x, const at::Tensor& base_output) = 0;
  /// The layer's weight [out, in] and bias ([out] or undefined) with the adapter folded in, such that
  /// x W'^T + b' = x W^T + b + delta(x, .) without dropout: what sampling computes.
  virtual std::pair<at::Tensor, at::Tensor> merged(const at::Tensor& weight, const at::Tensor& bias) const = 0;
};

/// Makes the adapter of one layer (of `in` inputs and `out` outputs).
using LinearAdapterFactory = std::function<std::shared_ptr<LinearAdapter>(std::int64_t in, std::int64_t out)>;

/// Attaches an adapter from `make` to every engine::Linear under `root` whose module name (e.g.
/// "down1_attn0.qkv") the ECMAScript regex `targets` finds; returns how many. Throws
/// std::invalid_argument, naming `key` and the Linear layers there are, when none matches, and when a
/// matching layer already has an adapter.
PRIVDIFF_SDK_API int attach_linear_adapters(torch::nn::Module& root, const std::string& targets, const std::string& key,
                                            const LinearAdapterFactory& make);

/// True when `module` is an adapter (its parameters have the role "adapter").
PRIVDIFF_SDK_API bool is_adapter(const torch::nn::Module& module);

}  // namespace privdiff::sdk::engine
