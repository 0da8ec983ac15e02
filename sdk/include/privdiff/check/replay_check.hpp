#pragma once
/// @file
/// The record-replay check of a mechanism under test (check/record_replay.hpp) as one call: the
/// mechanism's own code on the stand-in model, with extreme and typical neighbours x, the first and
/// a later logical step and the two after each, the batch in one chunk and in several, and the first
/// step at a clip norm above every typical record's gradient norm.

#include <privdiff/check/mechanism_under_test.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_report.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <vector>

namespace privdiff::sdk::check {

struct ReplayCheckOptions {
  double max_grad_norm = 1.0;     ///< C: the sensitivity the mechanism's ledger claims (its recipe's value)
  double noise_multiplier = 0.5;  ///< sigma of the replayed runs (the noise cancels; any value does)
  std::int64_t records = 21;      ///< N of D
  std::uint64_t data_seed = 7;    ///< D's images (uniform in [-1, 1])
  std::int64_t batch_size = 7;    ///< B (q = B / N)
  double magnitude = 1e6;         ///< how far out the extreme records' pixels go
  int random_neighbours = 3;      ///< typical (uniform random) records x besides the extreme ones
  std::vector<std::int64_t> physical_batch_sizes{0, 3};  ///< the batch in one chunk, and in chunks of 3
  std::vector<std::int64_t> steps{1, 2};                 ///< the logical steps audited (each with the two after it)
  /// > 0: step 1 in one chunk also with C times this. The stand-in's typical records then stay unclipped
  /// and the extreme ones do not, so a statistic of which records were clipped (adaptive clipping's
  /// count) moves with x, and a mechanism that keeps it without noise shows in the next steps.
  double large_clip_factor = 1000;
  /// The model of every run: by default the stand-in (ReplayModel, records of `shape` 1x4x4). Set
  /// model.make (and shape to its image_shape) to replay the recipe's own model; its public_data is
  /// every run's StageContext::public_data (records of the model's shape). A model that conditions on
  /// text (Model::conditions_on_text) gets captioned records: D's typical_captions, and the neighbours
  /// of captioned_neighbours (the extreme images with a caption past the context, and a typical image
  /// with each extreme caption, so that x's caption alone is held to C as well).
  ModelSpec model;
  ImageShape shape{1, 4, 4};
  /// > 0: D's batches fill chunks of this many examples and x is alone in the last one
  /// (DpSgdAudit::x_alone_in_chunk: a real diffusion model's loss draws its noise per chunk); only
  /// physical_batch_sizes of this size are then replayed.
  std::int64_t x_alone_in_chunk = 0;
  /// Named in each finding's audit, e.g. " on the recipe's model".
  std::string label;
};

/// Every replay's findings and distances (in units of C), merged.
PRIVDIFF_SDK_API Report check_by_record_replay(const MechanismUnderTest& make, const ReplayCheckOptions& options);

}  // namespace privdiff::sdk::check
