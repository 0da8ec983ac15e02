#pragma once
// The similarity transform (rotation, scale, shift) that best aligns one image with another, for the
// near-duplicate check (near_duplicates.hpp): what the field's pipelines do to an image before it is
// trained on or scored — a shift, a small rotation, a crop resized back, padding or resizing to another
// size — undone, so that a copy correlates with its original.
//
// A search over a grid of transforms around the one that the images' intensity centroids and radii of
// gyration suggest, then a finer grid around the best (and every whole-pixel shift, so that a plain
// shift is reported exactly), scored by correlation on the pixels that both images cover.

#include <ATen/core/Tensor.h>

namespace privdiff::core {

/// One batch of M image pairs. Each image as grey levels in [0, 1], [M, 1, S, S] (the first and the
/// second image may have different sizes S), raw and smoothed (near_duplicates.cpp: the alignment looks
/// through the smoothing, the score does not), with its shape: intensity centroid (x, y) in normalised
/// coordinates ([-1, 1] across the image, pixel centres at (2i + 1) / S - 1) [M, 2], radius of gyration
/// in the same units [M], and the standard deviation of its additive noise [M].
struct PairBatch {
  at::Tensor first, second;                  ///< raw
  at::Tensor first_smooth, second_smooth;
  at::Tensor first_centre, second_centre;
  at::Tensor first_radius, second_radius;
  at::Tensor first_noise, second_noise;
  at::Tensor rotation;  ///< [M] degrees: an estimate of the transform's (image_descriptors.hpp's polar match)
};

/// Per pair, the transform that best aligns the smoothed images, and the score of the raw images under
/// it: their correlation on the pixels both cover, with the variance the noise estimates explain taken
/// out of each image's (so that a noisy copy scores as its clean original would). The second image is
/// sampled at q = scale * R(rotation) * p + shift for each pixel centre p of the first (normalised
/// coordinates).
struct Alignment {
  at::Tensor correlation;  ///< [M], -1 where the images share too little area or one of them is flat
  at::Tensor rotation;     ///< [M] degrees, clockwise as the image is shown (rows downwards)
  at::Tensor scale;        ///< [M] how much larger the second image's content is
  at::Tensor shift;        ///< [M, 2] (x, y) pixels of the first image
};

/// What the search covers: rotations up to 10 degrees either way (from the estimate, within 4 degrees
/// of it), scales 0.8-1.25 (a crop of 2 pixels per side of 28 resized back is 1.17; 28 padded to 32 is
/// 0.875), and shifts that map one centroid to the other, give or take a pixel, before refinement.
inline constexpr double max_rotation_degrees = 10;
inline constexpr double min_scale = 0.8, max_scale = 1.25;

/// Pixel centres of a side x side image in normalised coordinates, [side * side, 2] (x, y), row by row.
at::Tensor pixel_centres(std::int64_t side);

/// The best transform of each pair and its score. Pairs whose coarse search (smoothed, at half size
/// from 16 x 16 up) stays below `refine_from` are not refined, and score -1.
Alignment align_pairs(const PairBatch& pairs, double refine_from);

}  // namespace privdiff::core
