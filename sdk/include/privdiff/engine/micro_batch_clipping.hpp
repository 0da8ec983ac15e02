#pragma once
/// @file
/// The micro-batch path of a private step: one example at a time through autograd (its K rows in
/// one pass), its gradient's norm taken and the clipped gradient added to the sum at once — never
/// more than one example's gradient in memory. Exact for any module (no closed form needed). On a
/// CPU with many rows per example (noise multiplicity K = 8 and more) it is often the faster path:
/// a one-example pass already fills the CPU, and no per-example norms are needed on top of the
/// ordinary backward. The engine chooses between it and fast gradient clipping per shape
/// (engine_path.hpp).

#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/sdk_api.hpp>

namespace privdiff::sdk::engine {

/// The clipped sum of `num_examples` examples' gradients (rows grouped `group` per example), as
/// clip_and_sum(micro_batch_per_example_gradients(...)) computes it, in O(#parameters) memory.
PRIVDIFF_SDK_API ClippedSum micro_batch_clipped_sum(torch::nn::Module& model, const RowLoss& loss,
                                                    std::int64_t num_examples, std::int64_t group,
                                                    double max_grad_norm, ClipMode mode,
                                                    const ClipRule& rule = {});

}  // namespace privdiff::sdk::engine
