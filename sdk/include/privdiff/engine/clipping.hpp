#pragma once
/// @file
/// Per-example clipping: each example's gradient is scaled by min(1, C / (||g|| + 1e-6)) and the
/// scaled gradients are summed. Flat clipping bounds the norm of the whole gradient vector by C;
/// per-layer clipping bounds each parameter tensor's norm by C / sqrt(P) (P tensors), which bounds
/// the whole vector by C too, so the sensitivity is C either way.

#include <privdiff/engine/capture.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

enum class ClipMode { flat, per_layer };

/// "flat" / "per_layer" -> ClipMode; throws std::invalid_argument otherwise.
PRIVDIFF_SDK_API ClipMode clip_mode_from_string(const std::string& name);

struct ClippedSum {
  std::vector<at::Tensor> sums;  ///< sum over examples of the clipped gradients, one per parameter
  at::Tensor norms;              ///< [B] norm of each example's whole gradient before clipping
  /// Scale applied to each example's gradient: [B] (flat) or [B, P] (per layer, one per parameter).
  at::Tensor factors;
  /// Where the time went, in seconds of wall time: "forward_backward" (the loss and the backward to
  /// the layer outputs), "norms", "clipped_sum" (fast gradient clipping fills it; on a GPU the
  /// kernels are not waited for, so only CPU figures are meaningful). For benchmarks.
  std::map<std::string, double> seconds;
};

/// A mechanism's own per-example clip rule (DpSgdMechanism::clip_factors): the factor an example's
/// gradient is scaled by, from its squared norms per parameter tensor ([1, P], float64, finite and
/// >= 0; called example by example): [1], or [1, P] for per-layer clipping. An empty rule, or one
/// that returns an undefined tensor, is the standard rule min(1, C / (||g|| + 1e-6)). Every engine
/// path (vectorised, ghost norms, micro-batch) applies it.
using ClipRule = std::function<at::Tensor(const at::Tensor& squared_norms)>;

/// Clips every example's gradient to max_grad_norm (with `rule`'s factors when given) and sums. An
/// empty batch gives zero sums.
PRIVDIFF_SDK_API ClippedSum clip_and_sum(const PerExampleGradients& gradients, double max_grad_norm, ClipMode mode,
                                         const ClipRule& rule = {});

/// The clip factors min(1, C' / (||g|| + 1e-6)) from per-example squared norms per parameter tensor
/// ([B, P], float64): [B] for flat clipping (C' = C on the whole norm), [B, P] per layer
/// (C' = C / sqrt(P) on each tensor's norm). An example with any norm that is not finite (an
/// overflow, a NaN or infinity in its data) gets factor 0 in every column: it contributes nothing,
/// which its sensitivity allows, instead of turning the whole sum into NaN. Negative squared norms
/// (rounding) count as 0.
PRIVDIFF_SDK_API at::Tensor clip_factors(const at::Tensor& squared_norms, double max_grad_norm, ClipMode mode);

/// `rule`'s factors (the standard ones when it is empty or returns undefined), held to the
/// sensitivity whatever the rule returns: the rule sees one example's norms at a time (a copy), each
/// factor is capped at C' / (||g|| + 1e-3 C') (C' as above, so no scaled gradient's norm exceeds C,
/// and a norm computed slightly low is not magnified without end), negative or NaN factors and
/// examples whose norms are not finite get 0, and a [1] rule under per-layer clipping applies to
/// every tensor. A rule can change how examples are weighted, never the sensitivity the ledger states.
PRIVDIFF_SDK_API at::Tensor clip_factors(const at::Tensor& squared_norms, double max_grad_norm, ClipMode mode,
                                         const ClipRule& rule);

/// [B] bool: the examples whose squared norms ([B, P]) are all finite. The others get factor 0, and
/// their rows must be left out of the sums too (0 times infinity is NaN).
PRIVDIFF_SDK_API at::Tensor finite_examples(const at::Tensor& squared_norms);

/// `rows` ([B * group, ...]) with the rows of the examples not in `keep` ([B] bool) set to 0.
PRIVDIFF_SDK_API at::Tensor zero_examples_not_kept(const at::Tensor& rows, const at::Tensor& keep, std::int64_t group);

}  // namespace privdiff::sdk::engine
