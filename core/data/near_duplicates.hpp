#pragma once
// Near-duplicate records between two datasets: what exact hashes (dataset_identity.hpp) cannot see.
// A record with one pixel changed, a mirror image or a copy shifted by a pixel hashes differently,
// yet shows the same person. Used where the user states that two datasets share no one ([run]
// init_from_disjoint): a pair found here refutes the statement.
//
// Two images are near-duplicates when, in grey levels and after normalisation (mean 0, norm 1:
// brightness and contrast do not matter), their correlation is at least `threshold` for some
// combination of a horizontal mirror and a shift of up to one pixel in each direction (compared on
// the overlap). Images of different sizes are compared at the smaller size, and at most 32 x 32.
// Images of (nearly) one grey level have no shape to compare and are left to the exact hashes.
//
// Cost: candidates from an 8 x 8 descriptor of each image (one matrix product over all pairs, in
// blocks: bounded memory), then every candidate checked at full size; tens of seconds for 60,000
// x 60,000 images on two cores.

#include <privdiff/components/dataset.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace privdiff::core {

struct NearDuplicate {
  std::int64_t first = -1;   ///< index in the first dataset
  std::int64_t second = -1;  ///< index in the second
  double correlation = 0;    ///< after normalisation, mirror and shift
  bool mirrored = false;
  int shift_x = 0, shift_y = 0;  ///< of the second image, in pixels
  /// "mirror image shifted by (1, 0) pixels", "the same after normalisation", ...
  std::string how() const;
};

/// The default correlation threshold. Distinct records reach it rarely: 20 of 1,000 Fashion-MNIST test
/// images have a training image at >= 0.99 (mostly the same product photographed twice), 223 at >= 0.97;
/// a changed pixel, a mirror image or a one-pixel shift scores ~1.
inline constexpr double near_duplicate_threshold = 0.99;

/// The most similar near-duplicate pair between `a` and `b`, or nullopt when there is none.
/// `log` (may be null) gets one line of progress for large checks.
std::optional<NearDuplicate> find_near_duplicate(const sdk::Dataset& a, const sdk::Dataset& b,
                                                 double threshold = near_duplicate_threshold,
                                                 std::ostream* log = nullptr);

}  // namespace privdiff::core
