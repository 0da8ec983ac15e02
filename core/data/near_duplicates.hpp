#pragma once
// Near-duplicate records between two datasets: what exact hashes (dataset_identity.hpp) cannot see.
// A record with one grey level changed, a mirror image, a copy shifted, rotated, cropped, padded or
// resized, or with noise added hashes differently, yet shows the same person. Used by the
// data-identity service (disjointness.hpp) wherever privdiff needs two datasets to share no one.
//
// Two images are near-duplicates when, in grey levels (colour averaged) and normalised (mean 0, norm 1:
// brightness and contrast do not matter), their pixel-by-pixel correlation on the area both cover is at
// least `threshold` under the best combination of
//   - a horizontal mirror,
//   - a rotation of up to 10 degrees either way,
//   - a scale of 0.8 to 1.25: a crop of up to 2 pixels per side of 28 resized back (1.17), 28 x 28
//     padded to 32 x 32 (0.875), or another crop, border or resizing of up to ~20%,
//   - a shift (of the content's centroid, and up to a pixel more; shifts of 2 pixels are found),
// with the variance that each image's estimated additive noise explains taken out of its own (so that a
// noisy copy scores as its clean original would). Each image is compared at its own size (at most 32 x
// 32: larger ones are averaged down), mapped onto the other by the transform, so a copy padded or
// resized to another size is not resampled twice.
//
// How (image_descriptors.hpp, image_alignment.hpp): each record of `a` is described by the magnitude
// spectra of polar samples about its centroid and about the frame's centre (unchanged by rotations and
// mirror images; at three scales for padding and crops), 24 records of `b` with the closest descriptors
// are ranked by how well the polar samples match when rotated (which also estimates the rotation and
// whether the copy is mirrored), and the best 8 are aligned: a coarse search around the estimates, then
// Gauss-Newton steps on the smoothed images, then the score on the raw ones.
//
// Measured on Fashion-MNIST (bench/near_duplicate_bench.cpp; docs/privacy.md#data-identity has the
// commands and the table): of 1,000 training records each changed and searched for among all 60,000, one
// grey level, a mirror image, resizing to 32 x 32 and noise of 10 grey levels are found 100%; padding to
// 32 x 32 99%; rotations of 3-10 degrees 93-100%; 2-pixel shifts 92-94%; noise of 25 grey levels 93%;
// 2-pixel crops resized back 87-90%; a shift, a rotation and noise together 85%. What is missed is missed
// when other records look more alike at a glance (the candidates) or when resampling and noise together
// lower the score below the threshold.
// Not looked for: rotations beyond 10 degrees, vertical flips, inverted (negative) images, gamma and other
// non-linear grey-level changes, blur (an independent audit found 1 of 50 copies blurred by one pixel, 11
// of 50 under gamma 2, 3 of 50 rotated by 15 degrees, none flipped vertically or inverted), larger crops or
// shifts, colour or style changes, heavy noise, cut-outs pasted elsewhere, another photograph of the same
// person or object. Every caveat resting on this check names them (near_duplicates_not_looked_for).
// Images of (nearly) one grey level have no shape and are left to the hashes.
//
// False alarms: distinct records can be near-duplicates of each other (the same product photographed
// twice, or the same photograph re-encoded): 1.0% of Fashion-MNIST's 10,000 test images have one among
// its 60,000 training images at the default threshold (near_duplicate_threshold).
//
// Cost: about 7 ms a record of `a` against 60,000 of `b` on two cores (74 s for Fashion-MNIST's test
// split against its training split); memory: a byte a pixel plus ~2 KB of descriptors and polar samples
// a record (pairs are compared in blocks: bounded).

#include <privdiff/components/dataset.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace privdiff::core {

struct NearDuplicate {
  std::int64_t first = -1;   ///< index in the first dataset
  std::int64_t second = -1;  ///< index in the second
  double correlation = 0;    ///< after normalisation and the transform below, allowing for noise (at most 1)
  bool mirrored = false;     ///< the second image is mirrored left to right
  double rotation = 0;       ///< degrees, clockwise as shown, of the second image's content
  double scale = 1;          ///< how much larger the second image's content is
  double shift_x = 0, shift_y = 0;  ///< of the second image's content, in pixels of the first image
  /// "a mirror image rotated clockwise by 5 degrees and shifted by (1, 0) pixels, correlation 0.9950 ..."
  std::string how() const;
};

/// The default correlation threshold. Measured on Fashion-MNIST: test images with a training image at
/// or above it 1.0% (at 0.99: 3.5%); changed copies found above.
inline constexpr double near_duplicate_threshold = 0.995;

/// What the check looks for and what it does not, for the caveats of statements it tested.
inline constexpr const char* near_duplicates_looked_for =
    "near-duplicates (mirror images, shifts of a few pixels, rotations up to 10 degrees, crops, padding or "
    "resizing by up to ~20%, brightness, contrast, noise up to ~25 grey levels)";
inline constexpr const char* near_duplicates_not_looked_for =
    "rotations beyond 10 degrees, vertical flips, inverted (negative) images, gamma or other non-linear grey-level "
    "changes, blur (even of one pixel), larger crops or shifts, colour or style changes, heavy noise, other "
    "photographs of the same person or object";

/// For every record of `a` that has one, its most similar near-duplicate in `b`, in the order of `a`.
/// `log` (may be null) gets one line of progress for large checks.
std::vector<NearDuplicate> find_near_duplicates(const sdk::Dataset& a, const sdk::Dataset& b,
                                                double threshold = near_duplicate_threshold,
                                                std::ostream* log = nullptr);

/// The most similar near-duplicate pair between `a` and `b`, or nullopt when there is none.
std::optional<NearDuplicate> find_near_duplicate(const sdk::Dataset& a, const sdk::Dataset& b,
                                                 double threshold = near_duplicate_threshold,
                                                 std::ostream* log = nullptr);

}  // namespace privdiff::core
