#pragma once
/// @file
/// How a per-example layer computes its per-example gradient norms — the part of a private step
/// that a non-private step does not have. Every strategy is exact (the same norms up to float
/// rounding); they differ in cost, which depends on the layer's shape and the device:
///   materialised        form each example's gradient (batched products over the layer's positions),
///                       take its norm: cost ∝ T·D_in·D_out per example.
///   ghost               ||g_i||² = <A_iᵀA_i, G_iᵀG_i> from the Gram matrices of the example's T
///                       inputs and output gradients (Li et al. 2022; for convolutions over the
///                       unfolded positions): cost ∝ T²·(D_in + D_out), cheap where T is small
///                       (Linear on one token, low-resolution convolutions, attention projections).
///   grouped_convolution a convolution's per-example gradients as the weight gradient of one
///                       convolution with the examples as groups: the library's own (fast) kernel.
///   gradient_filter     a convolution's per-example gradients as one forward convolution of its
///                       input, channels as the batch, with each example's output gradient as the
///                       filter (examples as groups): fastest where a layer has few output channels
///                       (a UNet's output convolution: 4.6x faster than materialised on a CPU).
/// NormPlanner picks one per layer call: by a FLOP model, or by timing every candidate the first time
/// it meets a call's shape (calibration), then keeping the fastest.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace privdiff::sdk::engine {

enum class NormStrategy { materialised, ghost, grouped_convolution, gradient_filter };

PRIVDIFF_SDK_API std::string to_string(NormStrategy strategy);
/// "materialised" / "ghost" / "grouped_convolution" / "gradient_filter" -> NormStrategy; throws
/// std::invalid_argument.
PRIVDIFF_SDK_API NormStrategy norm_strategy_from_string(const std::string& name);

/// A strategy a layer offers for one call, with its cost in the FLOP model (multiply-adds per example).
struct NormCandidate {
  NormStrategy strategy;
  double flops_per_example;
};

class PerExampleLayer;
struct CapturedCall;

/// Chooses each layer call's norm strategy and remembers the choice per (layer, per-example shape).
class PRIVDIFF_SDK_API NormPlanner {
 public:
  enum class Mode {
    cost_model,  ///< the fewest FLOPs, with the library's own convolution kernel preferred at equal FLOPs
    calibrate,   ///< time each candidate on the first call of each shape, keep the fastest
    fixed,       ///< always `fixed_strategy` where the layer offers it (tests, ablations)
  };
  explicit NormPlanner(Mode mode = Mode::cost_model, NormStrategy fixed_strategy = NormStrategy::materialised);

  /// The squared norms ([slice examples], one per trainable parameter of the layer) of one call's
  /// slice of examples, with the strategy chosen for it. With `gradients`, the per-example
  /// gradients that strategy formed on the way are handed back there (PerExampleLayer::per_example_by;
  /// empty when it forms none, and on the call that calibrates the shape).
  std::vector<at::Tensor> squared_norms(const PerExampleLayer& layer, const CapturedCall& call, const at::Tensor& output_grad,
                                        std::int64_t group, std::vector<at::Tensor>* gradients = nullptr);
  /// Stop timing: shapes met later use the cost model (after a calibration pass).
  void freeze() { frozen_ = true; }
  /// How many calls of each strategy the plan holds ({"ghost": 12, ...}), for metrics.
  std::map<std::string, int> counts() const;
  Mode mode() const { return mode_; }

 private:
  using Key = std::tuple<const void*, std::vector<std::int64_t>, std::int64_t>;
  NormStrategy choose(const std::vector<NormCandidate>& candidates) const;
  Mode mode_;
  NormStrategy fixed_;
  bool frozen_ = false;
  std::map<Key, NormStrategy> plan_;
};

}  // namespace privdiff::sdk::engine
