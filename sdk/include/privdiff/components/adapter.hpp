#pragma once
/// @file
/// Adapter: extra trainable parameters grafted onto chosen layers of any model (LoRA, IA3, ...),
/// so that a stage can fine-tune them alone (`train = "adapter"`). Models know nothing of adapters:
/// the host builds the model, then asks the recipe's [adapter] to wrap it, before any weights are
/// loaded, so a run's adapter saves and loads with its model. The layer-level side (what an adapted
/// layer computes, its per-example gradients, its merged form for sampling) is
/// engine/linear_adapter.hpp.

#include <privdiff/components/component.hpp>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace privdiff::sdk {

class PRIVDIFF_SDK_API Adapter : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::adapter;
  ~Adapter() override;

  /// Attaches this adapter to the layers of `model_root` (a model's module tree) it is configured
  /// to wrap, and returns how many. Called once per model, before weights are loaded. Throws
  /// std::invalid_argument when it wraps nothing (naming the layers there are).
  virtual int wrap(torch::nn::Module& model_root) = 0;
};

}  // namespace privdiff::sdk
