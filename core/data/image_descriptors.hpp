#pragma once
// How the near-duplicate check (near_duplicates.hpp) describes images to find candidate pairs among
// many: each image's shape (intensity centroid, radius of gyration), the level of its additive noise,
// and polar samples of its content about an anchor — its centroid (which a shift moves with the
// content) or the frame's centre (which a crop, padding or resizing keeps) — whose magnitude spectrum
// over the angle does not change when the image is rotated or mirrored.
//
// Images are [N, 1, S, S] grey levels in [0, 1]; coordinates are normalised ([-1, 1] across the image,
// pixel centres at (2i + 1) / S - 1), so that images of different sizes compare.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::core {

/// A Gaussian blur of `sigma` pixels (edges replicated), as one matrix product per axis.
at::Tensor smoothed(const at::Tensor& images, double sigma);

/// What stands out from the background (the border's median grey level): its intensity centroid [N, 2]
/// and radius of gyration [N]; images with nothing standing out get the frame's centre and radius.
/// `flat`: images of (nearly) one grey level [N], which have no shape to compare.
struct Shape {
  at::Tensor centre, radius, flat;
};
Shape shape_of(const at::Tensor& smooth);

/// The standard deviation of additive white noise in each image [N], from the median absolute Laplacian
/// (Immerkaer 1996, robustly): flat regions show the noise; texture and edges are outvoted.
at::Tensor noise_level(const at::Tensor& images);

/// Where polar samples are taken: about the centroid or about the frame's centre, out to `reach`
/// (normalised units) times `scale`.
enum class Anchor { centroid, frame };

/// Samples of `smooth` on rings about the anchor, out to a fixed reach times `scale` (a number, or one
/// per image [N]): [N, rings, angles], the angle running clockwise as the image is shown from +x.
at::Tensor polar_samples(const at::Tensor& smooth, const Shape& shape, Anchor anchor, const at::Tensor& scale);

/// Unchanged by rotation and mirror images: each ring's magnitude spectrum over the angle (its first
/// harmonics), normalised: [N, D].
at::Tensor polar_descriptors(const at::Tensor& samples);

/// The rotation that best maps the first images' polar samples onto the second's, with or without
/// mirroring the second (left to right), and how well: per pair [M], from the circular correlation
/// over the angle.
struct PolarMatch {
  at::Tensor correlation;  ///< [M] of the normalised samples at the best angle
  at::Tensor rotation;     ///< [M] degrees, clockwise, of the second image's content (after mirroring)
  at::Tensor mirrored;     ///< [M] bool
};
PolarMatch match_polar(const at::Tensor& first, const at::Tensor& second);

}  // namespace privdiff::core
