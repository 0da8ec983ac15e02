#pragma once
/// @file
/// The path a private step takes, chosen per shape. Two exact ways give a chunk's clipped gradient
/// sum: fast gradient clipping (vectorised: one batched forward and backward, per-layer norm
/// strategies) and the micro-batch path (one example at a time). Which is faster depends on the
/// device and the shape — on a GPU the vectorised path wins by far; on a CPU, with many rows per
/// example, one example's pass already fills the machine and the micro-batch path can win — and
/// the vectorised path's own speed depends on the chunk size (cache-sized chunks are faster per
/// example on a CPU). calibrate_engine() measures both on a synthetic chunk at a stage's start and
/// keeps the faster; the choice goes into the stage's metrics.

#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/norm_strategy.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

enum class EnginePath { automatic, vectorised, micro_batch };

/// "auto" / "vectorised" / "micro_batch" -> EnginePath; throws std::invalid_argument.
PRIVDIFF_SDK_API EnginePath engine_path_from_string(const std::string& name);
PRIVDIFF_SDK_API std::string to_string(EnginePath path);

/// What a stage computes its chunks with.
struct PRIVDIFF_SDK_API EnginePlan {
  EnginePath path = EnginePath::vectorised;
  std::int64_t chunk = 0;  ///< examples per physical chunk
  /// What the calibration measured: seconds per example, by "vectorised/CHUNK" and "micro_batch".
  std::map<std::string, double> seconds_per_example;
  /// Vectorised chunks: one backward with the layer outputs' gradients held, or two with none held
  /// (fast_gradient_clipping.hpp).
  ClipPasses passes = ClipPasses::one;
  /// For metrics: path, chunk, norm strategies and the measurements, as text.
  std::map<std::string, std::string> describe(const NormPlanner& planner) const;
};

/// What calibration needs: a loss over `examples` synthetic examples (never private data: the
/// choice is recorded, so it must not depend on the records), and the step's settings.
struct EngineCalibration {
  std::function<RowLoss(std::int64_t examples)> synthetic_loss;
  std::int64_t chunk = 1;          ///< the configured chunk (physical batch size, or the expected batch)
  bool may_shrink_chunk = false;   ///< try chunk / 8, / 4, / 2 too (not when the user set the size)
  std::int64_t group = 1;          ///< rows per example (K)
  double max_grad_norm = 1.0;
  ClipMode mode = ClipMode::flat;
  ClipRule rule;                   ///< the mechanism's clip rule (empty: the standard one), timed as it will run
  EnginePath requested = EnginePath::automatic;  ///< a fixed path is kept, only the norm strategies are planned
  ClipPasses passes = ClipPasses::one;           ///< the vectorised path's backward passes, timed as they will run
};

/// The chunks a calibration may try, smallest first: `chunk` / 8, / 4, / 2 and `chunk` itself, those
/// after the first only up to `max_rows` rows (examples x rows per example), when it may shrink;
/// else `chunk` alone.
PRIVDIFF_SDK_API std::vector<std::int64_t> chunks_to_try(std::int64_t chunk, bool may_shrink,
                                                         std::int64_t rows_per_example = 1,
                                                         std::int64_t max_rows = INT64_MAX);

/// The chunk to use: of those tried (smallest first, the next only while the last was within 1.5 times
/// the best: a chunk's memory grows with it), the largest within 5 % of the least time per example.
PRIVDIFF_SDK_API std::int64_t fastest_chunk(const std::vector<std::int64_t>& ascending,
                                            const std::function<double(std::int64_t chunk)>& seconds_per_example);

/// Plans the norm strategies (into `planner`, which is frozen afterwards) and chooses the path and
/// chunk with the least time per example (fastest_chunk). A model without closed-form layers takes the micro-batch
/// path without measuring.
PRIVDIFF_SDK_API EnginePlan calibrate_engine(torch::nn::Module& model, const EngineCalibration& settings,
                                             NormPlanner& planner);

/// The clipped sum of one chunk along `plan`'s path.
PRIVDIFF_SDK_API ClippedSum clipped_sum_along(const EnginePlan& plan, torch::nn::Module& model, const RowLoss& loss,
                                              std::int64_t examples, std::int64_t group, double max_grad_norm,
                                              ClipMode mode, NormPlanner& planner, const ClipRule& rule = {});

}  // namespace privdiff::sdk::engine
