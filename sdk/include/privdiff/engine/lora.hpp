#pragma once
/// @file
/// LoRA adapters (Hu et al. 2021) on the per-example Linear layers of a model: W x + b becomes
/// W x + b + (alpha / r) B A dropout(x) with A [r, in], B [out, r] (B starts at zero, so an adapted
/// model starts equal to its base). Only A and B are meant to train (parameter role "lora", preset
/// train = "lora"); their per-example gradients are closed-form like every other layer's. In eval
/// mode (sampling) a layer applies the merged weight W + (alpha / r) B A in one product.

#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace privdiff::sdk::engine {

struct LoraOptions {
  std::int64_t rank = 0;   ///< r; 0 = no adapters
  double alpha = 0;        ///< scale alpha / r; 0 = alpha equal to the rank (scale 1)
  double dropout = 0;      ///< dropout on the adapter's input, training only
  /// ECMAScript regex searched in a Linear layer's module name (e.g. "down1_attn0.qkv").
  std::string targets = "attn[0-9]*\\.(qkv|proj|q|k|v|out)$";
};

/// Adds lora_rank, lora_alpha, lora_dropout and lora_targets to a model's schema.
PRIVDIFF_SDK_API Schema& add_lora_keys(Schema& schema);
PRIVDIFF_SDK_API LoraOptions lora_options(const Config& config);

/// Adds adapters to every engine::Linear under `root` whose name matches options.targets. Returns
/// how many; throws std::invalid_argument when none matches (naming the Linear layers there are).
PRIVDIFF_SDK_API int apply_lora(torch::nn::Module& root, const LoraOptions& options);

}  // namespace privdiff::sdk::engine
