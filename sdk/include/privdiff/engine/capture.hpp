#pragma once
/// @file
/// Capture of what per-example gradients need. While a CaptureSession is active on the current
/// thread, every per-example layer (per_example_layers.hpp) with trainable parameters records its
/// forward calls: what it needs from the input, and the output tensor. The engine then asks autograd
/// for the gradients of the loss with respect to those outputs only — so the ordinary (summed)
/// weight gradients are never computed — and each layer turns its (input, output-gradient) pairs
/// into per-example parameter gradients in closed form.

#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace privdiff::sdk::engine {

class PerExampleLayer;

/// Per-example gradients of a set of parameters: grads[j] has shape [B, *params[j].shape].
struct PerExampleGradients {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grads;
  std::int64_t num_examples = 0;
};

/// One recorded forward call of a layer.
struct CapturedCall {
  PerExampleLayer* layer;
  at::Tensor saved;   ///< what the layer needs (input, unfolded input, normalised input, indices)
  at::Tensor output;  ///< the layer's output (still attached to the graph)
  std::int64_t output_version = 0;  ///< to detect later in-place changes, which would corrupt the gradients
};

/// Where the two-backward clipping (fast_gradient_clipping.hpp) takes each layer output's gradient
/// while a backward pass runs, so that autograd never hands back (and nobody holds) the gradients
/// of all outputs at once. When it runs: on autograd's thread, once per recorded call whose output
/// reached the loss, as soon as autograd has summed the gradient with respect to that output and
/// before the gradient flows on into the layer's own backward; calls come in backward order (last
/// layer first). What is guaranteed: `gradient` has the output's shape; the sink may read and keep
/// it, never modify it (autograd passes the same tensor on).
class PRIVDIFF_SDK_API OutputGradientSink {
 public:
  virtual ~OutputGradientSink();
  /// `call`: the index of the call in CaptureSession::calls().
  virtual void on_output_gradient(std::size_t call, const at::Tensor& gradient) = 0;
};

/// RAII: makes per-example layers record their forward calls on this thread until destroyed.
class PRIVDIFF_SDK_API CaptureSession {
 public:
  CaptureSession();
  /// A session whose recorded outputs are tapped: the output tensor itself (the layer returns it
  /// unchanged) gets a pass-through autograd node that hands its gradient to `sink` in every later
  /// backward pass through it (while the sink lives), and leads to probe(). A backward to probe()
  /// alone (torch::autograd::grad({loss}, {session.probe()})) thus runs every tap without computing
  /// any weight gradient or keeping any output gradient.
  explicit CaptureSession(std::shared_ptr<OutputGradientSink> sink);
  ~CaptureSession();
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  /// The session active on this thread, or nullptr.
  static CaptureSession* current();
  void record(PerExampleLayer* layer, at::Tensor saved, at::Tensor output);
  const std::vector<CapturedCall>& calls() const { return calls_; }
  /// The leaf every tapped output leads to (a float scalar on the CPU; undefined without a sink).
  const at::Tensor& probe() const { return probe_; }

 private:
  std::vector<CapturedCall> calls_;
  CaptureSession* previous_;
  std::shared_ptr<OutputGradientSink> sink_;
  at::Tensor probe_;
};

/// Records a forward call of `layer` (`saved`: what its per-example gradients need, detached here;
/// `output`: its output, still attached to the graph) when a session is active on this thread,
/// gradients are on, and the layer has trainable parameters; otherwise does nothing.
PRIVDIFF_SDK_API void record_if_capturing(PerExampleLayer* layer, const at::Tensor& saved, const at::Tensor& output);
/// True when record_if_capturing(layer, ...) would record now: lets a layer compute what it saves
/// only then (a non-private step and sampling pay nothing for it).
PRIVDIFF_SDK_API bool will_record(const PerExampleLayer* layer);

/// Implemented by every layer with a closed-form per-example gradient.
class PRIVDIFF_SDK_API PerExampleLayer {
 public:
  virtual ~PerExampleLayer();
  /// The parameters this layer computes per-example gradients for (its trainable ones).
  virtual std::vector<at::Tensor> trainable_parameters() const = 0;
  /// The per-example gradients of one recorded call: one [B, *shape] tensor per
  /// trainable_parameters() entry (freshly allocated: the engine may keep it as the result). The
  /// call's rows are grouped `group` consecutive rows per example (noise multiplicity K), so
  /// B = rows / group.
  virtual std::vector<at::Tensor> per_example(const CapturedCall& call, const at::Tensor& output_grad,
                                              std::int64_t group) const = 0;
  /// sum_i scale_j[i] * (per-example gradient of example i), for each trainable parameter j, without
  /// forming per-example gradients: the ordinary (summed) gradient of the output gradient with the
  /// rows of example i multiplied by scale_j[i]. `scales` has one [B] tensor per parameter.
  virtual std::vector<at::Tensor> scaled_sum(const CapturedCall& call, const at::Tensor& output_grad,
                                             std::int64_t group, const std::vector<at::Tensor>& scales) const = 0;
  /// The exact ways this layer offers to compute one call's per-example gradient norms, with their
  /// costs in the FLOP model (norm_strategy.hpp). Default: materialised only.
  virtual std::vector<NormCandidate> norm_candidates(const CapturedCall& call, std::int64_t group) const;
  /// The squared norms ([B], float64) of each trainable parameter's per-example gradient of one
  /// call, computed with `strategy` (one of norm_candidates()). Default: from the gradients
  /// per_example_by() forms (per_example() where it forms none).
  virtual std::vector<at::Tensor> per_example_squared_norms(const CapturedCall& call, const at::Tensor& output_grad,
                                                            std::int64_t group, NormStrategy strategy) const;
  /// The per-example gradients of one call as `strategy` forms them on its way to their norms (one
  /// [B, *shape] tensor per trainable parameter), or nothing where it never forms them (ghost): the
  /// engine then sums them with the clip factors directly (a matrix-vector product) instead of a
  /// second weight-gradient pass. Default: per_example() for the materialised strategy.
  virtual std::vector<at::Tensor> per_example_by(const CapturedCall& call, const at::Tensor& output_grad,
                                                 std::int64_t group, NormStrategy strategy) const;
};

/// The squared norm of each example's gradient ([B, ...] -> [B], float64): the reduction every
/// strategy ends with (in the gradients' own dtype, kept in float64).
PRIVDIFF_SDK_API at::Tensor squared_norms_of(const at::Tensor& per_example);
/// The same for each of a layer's per-example gradients.
PRIVDIFF_SDK_API std::vector<at::Tensor> squared_norms_of(const std::vector<at::Tensor>& per_example);

}  // namespace privdiff::sdk::engine
