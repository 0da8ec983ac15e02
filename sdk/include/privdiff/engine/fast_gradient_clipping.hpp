#pragma once
/// @file
/// Fast gradient clipping: the clipped sum sum_i min(1, C / ||g_i||) g_i of a batch without ever
/// holding all per-example gradients. After one forward and one backward (to the layer outputs):
///   1. norms: each layer's per-example squared norms by the strategy its NormPlanner chose
///      (norm_strategy.hpp: ghost norms, a grouped convolution, or per-example gradients formed and
///      freed — at most one layer's slice x params in memory at a time);
///   2. clipped sum: where a norm strategy formed the per-example gradients anyway (materialised, a
///      grouped convolution), they are kept for the slice of examples at hand (at most 256 MiB) and
///      summed with the slice's clip factors — a matrix-vector product, no second pass; every other
///      layer's clipped sum is the *ordinary* weight gradient of its output gradient with example
///      i's rows scaled by its clip factor — one call to the library's fast kernel per layer.
/// Same result as clip_and_sum(per_example_gradients(...)) (tested), at a fraction of the memory.
/// This is the "fast gradient clipping" of Opacus, without its second backward pass.
///
/// Its memory: after the backward, every captured layer's input and output gradient for the chunk
/// at once (about twice a non-private step's activations). clipped_gradient_sum_two_passes trades
/// time for that memory (ClipPasses::two): the norms are taken inside the backward, as each layer
/// output's gradient arrives (CaptureSession's taps), so no output gradient is held; the sums then
/// come from a replay of the same backward (the graph retained, the clip factors known), each
/// layer's captured input released once summed. Its peak is about a non-private step's. It costs a
/// second backward to the layer outputs; both passes run with cuDNN's deterministic algorithms, and
/// every replayed output gradient is checked to equal the first pass's (per-example fingerprints),
/// so the sums are those of the gradients whose norms were clipped: a mismatch is an error, never
/// a silent excess over C.

#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/sdk_api.hpp>

#include <stdexcept>
#include <string>

namespace privdiff::sdk::engine {

/// How many backward passes the vectorised clipped sum takes (above).
enum class ClipPasses { one, two };
/// "one" / "two" -> ClipPasses; throws std::invalid_argument.
PRIVDIFF_SDK_API ClipPasses clip_passes_from_string(const std::string& name);
PRIVDIFF_SDK_API std::string to_string(ClipPasses passes);

/// Clipped sum of the per-example gradients of `num_examples` examples (rows grouped `group` per
/// example, as per_example_gradients). Falls back to the micro-batch path, with the same warning,
/// for models with parameters outside per-example layers.
PRIVDIFF_SDK_API ClippedSum clipped_gradient_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t num_examples,
                                                 std::int64_t group, double max_grad_norm, ClipMode mode,
                                                 const ClipRule& rule = {});
/// The same with the caller's planner, which keeps its choices from call to call (a stage keeps one).
PRIVDIFF_SDK_API ClippedSum clipped_gradient_sum(torch::nn::Module& model, const RowLoss& loss, std::int64_t num_examples,
                                                 std::int64_t group, double max_grad_norm, ClipMode mode,
                                                 NormPlanner& planner, const ClipRule& rule = {});

/// What clipped_gradient_sum_two_passes throws when the replayed backward's output gradients differ
/// from the first pass's: nothing of the chunk was summed; one pass over the chunk is exact.
class PRIVDIFF_SDK_API ReplayMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The same result with two backward passes and no output gradient held (ClipPasses::two, above).
/// Throws ReplayMismatch when the replayed backward's output gradients differ from the first's.
PRIVDIFF_SDK_API ClippedSum clipped_gradient_sum_two_passes(torch::nn::Module& model, const RowLoss& loss,
                                                            std::int64_t num_examples, std::int64_t group,
                                                            double max_grad_norm, ClipMode mode, NormPlanner& planner,
                                                            const ClipRule& rule = {});

}  // namespace privdiff::sdk::engine
