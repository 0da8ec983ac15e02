#include "data/image_alignment.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace privdiff::core {

namespace {

constexpr double radians_per_degree = 3.14159265358979323846 / 180;
constexpr double min_shared_area = 0.6;  // of the first image's pixels: less is not a comparison
constexpr double flat_variance = 1e-5;   // per pixel, grey in [0, 1]: a spread of about one grey level
constexpr std::int64_t max_elements = std::int64_t{1} << 22;  // of one [pairs, hypotheses, pixels] tensor
constexpr int refinement_steps = 4;
constexpr double damping = 1e-2;  // Levenberg-Marquardt, relative to the curvature of each parameter
// A copy is reported as a whole-pixel shift where that correlates as well, within the larger of 5e-4 and a
// tenth of what separates the refined transform from identity (noise that the refinement fits).
constexpr double plain_shift_tolerance = 5e-4, plain_shift_share = 0.1;

at::Tensor row(const std::vector<double>& values) {
  return at::tensor(values, at::kDouble).to(at::kFloat).unsqueeze(0);
}

// Where `points` [P, 2] go under rotation (degrees), scale and shift [..., 2] (any leading shape L):
// x and y [L..., P], and R p before the scale and shift (for the derivatives).
struct Mapped {
  at::Tensor x, y, rx, ry;
};

Mapped mapped(const at::Tensor& rotation, const at::Tensor& scale, const at::Tensor& shift, const at::Tensor& points) {
  const at::Tensor angle = (rotation * radians_per_degree).unsqueeze(-1);
  const at::Tensor c = at::cos(angle), s = at::sin(angle);
  const at::Tensor px = points.select(1, 0), py = points.select(1, 1);
  const at::Tensor rx = c * px - s * py, ry = s * px + c * py;
  return {scale.unsqueeze(-1) * rx + shift.select(-1, 0).unsqueeze(-1),
          scale.unsqueeze(-1) * ry + shift.select(-1, 1).unsqueeze(-1), rx, ry};
}

// 1 where a mapped point falls within the image's outer pixel centres (where bilinear sampling reads
// only its pixels: a copy rotated with black filling in blends black into the band outside), else 0.
at::Tensor inside(const Mapped& q, std::int64_t side) {
  const double edge = 1 - 1.0 / static_cast<double>(side);
  return ((q.x.abs() <= edge) & (q.y.abs() <= edge)).to(at::kFloat);
}

// Correlation of a and b over the last dimension, weighted by w (0 or 1), broadcasting; -1 where too
// little is shared or either side is flat there.
at::Tensor masked_correlation(const at::Tensor& a, const at::Tensor& b, const at::Tensor& w) {
  const at::Tensor n = w.sum(-1, true).clamp_min(1);
  const at::Tensor da = (a - (a * w).sum(-1, true) / n) * w;
  const at::Tensor db = (b - (b * w).sum(-1, true) / n) * w;
  const at::Tensor va = (da * da).sum(-1), vb = (db * db).sum(-1), shared = n.squeeze(-1);
  const at::Tensor r = (da * db).sum(-1) / (va * vb).sqrt().clamp_min(1e-12);
  const at::Tensor usable = (shared >= min_shared_area * static_cast<double>(a.size(-1))) &
                            (va > flat_variance * shared) & (vb > flat_variance * shared);
  return at::where(usable, r, at::full({}, -1.0, r.options()));
}

// The images [M, C, S, S] at mapped points [M, H, P] (or [M, P]): [M, C, H, P] (or [M, C, 1, P]).
at::Tensor sampled(const at::Tensor& images, const Mapped& q) {
  const at::Tensor grid = at::stack({q.x, q.y}, -1);
  return at::grid_sampler(images, grid.dim() == 3 ? grid.unsqueeze(1) : grid, /*bilinear*/ 0, /*border*/ 1, false);
}

struct Hypotheses {
  at::Tensor rotation, scale, shift;  // [M, H] degrees, [M, H], [M, H, 2] normalised
};

// Around the estimates (the refinement corrects the rest): the rotation +-4 degrees, the ratio of the
// radii of gyration as the scale, the shift that maps one centroid to the other under them, and that
// shift moved by up to a pixel.
Hypotheses coarse_hypotheses(const PairBatch& p, std::int64_t side) {
  std::vector<double> rotation, dx, dy;
  for (const double r : {-4.0, 0.0, 4.0}) {
    for (int y = -1; y <= 1; ++y) {
      for (int x = -1; x <= 1; ++x) rotation.push_back(r), dx.push_back(x), dy.push_back(y);
    }
  }
  const at::Tensor ratio = (p.second_radius / p.first_radius.clamp_min(1e-6)).clamp(min_scale, max_scale);
  const at::Tensor scale = ratio.unsqueeze(1).expand({-1, static_cast<std::int64_t>(rotation.size())});
  const at::Tensor turned = (p.rotation.unsqueeze(1) + row(rotation)).clamp(-max_rotation_degrees, max_rotation_degrees);
  const at::Tensor angle = turned * radians_per_degree;
  const at::Tensor c = at::cos(angle) * scale, s = at::sin(angle) * scale;
  const at::Tensor ax = p.first_centre.select(1, 0).unsqueeze(1), ay = p.first_centre.select(1, 1).unsqueeze(1);
  const double pixel = 2.0 / static_cast<double>(side);
  const at::Tensor tx = p.second_centre.select(1, 0).unsqueeze(1) - (c * ax - s * ay) + row(dx) * pixel;
  const at::Tensor ty = p.second_centre.select(1, 1).unsqueeze(1) - (s * ax + c * ay) + row(dy) * pixel;
  return {turned, scale, at::stack({tx, ty}, 2)};
}

// The correlation of `first` [M, P] with `second` sampled at each hypothesis's map of `points`, on the
// points inside `second`: [M, H] (as masked_correlation, its sums as batched products: fewer passes).
at::Tensor hypothesis_correlations(const at::Tensor& first, const at::Tensor& points, const at::Tensor& second,
                                   const Hypotheses& h) {
  const std::int64_t p = points.size(0);
  const at::Tensor angle = h.rotation * radians_per_degree;
  const at::Tensor c = at::cos(angle) * h.scale, s = at::sin(angle) * h.scale;
  const at::Tensor coefficients =
      at::stack({at::stack({c, -s, h.shift.select(2, 0)}, 2), at::stack({s, c, h.shift.select(2, 1)}, 2)}, 2);
  const at::Tensor homogeneous = at::cat({points.t(), at::ones({1, p})}, 0);  // [3, P]
  const at::Tensor q = at::matmul(coefficients, homogeneous);                // [M, H, 2, P]
  const double edge = 1 - 1.0 / static_cast<double>(second.size(3));
  const at::Tensor w = std::get<0>(q.abs().max(2)).le(edge).to(at::kFloat);  // [M, H, P]
  const at::Tensor b = at::grid_sampler(second, q.transpose(2, 3), 0, 1, false).squeeze(1);
  const at::Tensor a = first.unsqueeze(2), wb = w * b;                       // [M, P, 1]
  const at::Tensor count = w.sum(2), sum_a = at::bmm(w, a).squeeze(2), sum_aa = at::bmm(w, a * a).squeeze(2);
  const at::Tensor sum_b = wb.sum(2), sum_bb = (wb * b).sum(2), sum_ab = at::bmm(wb, a).squeeze(2);
  const at::Tensor k = count.clamp_min(1);
  const at::Tensor va = sum_aa - sum_a * sum_a / k, vb = sum_bb - sum_b * sum_b / k, cov = sum_ab - sum_a * sum_b / k;
  const at::Tensor r = cov / (va * vb).clamp_min(1e-18).sqrt();
  const at::Tensor usable = (count >= min_shared_area * static_cast<double>(p)) & (va > flat_variance * count) &
                            (vb > flat_variance * count);
  return at::where(usable, r, at::full({}, -1.0, r.options()));
}

// The best hypothesis of each pair: `first` [M, P] at `points`, `second` [M, 1, S, S] (pairs in chunks:
// bounded memory). Its shift stays normalised.
Alignment best_hypothesis(const at::Tensor& first, const at::Tensor& points, const at::Tensor& second,
                          const Hypotheses& h) {
  const std::int64_t chunk = std::max<std::int64_t>(1, max_elements / (h.rotation.size(1) * points.size(0)));
  std::vector<at::Tensor> parts;
  for (std::int64_t i = 0; i < first.size(0); i += chunk) {
    const std::int64_t n = std::min(chunk, first.size(0) - i);
    const Hypotheses part{h.rotation.narrow(0, i, n), h.scale.narrow(0, i, n), h.shift.narrow(0, i, n)};
    parts.push_back(hypothesis_correlations(first.narrow(0, i, n), points, second.narrow(0, i, n), part));
  }
  const at::Tensor scores = at::cat(parts);
  const at::Tensor index = scores.argmax(1, true);
  return {scores.gather(1, index).squeeze(1), h.rotation.gather(1, index).squeeze(1), h.scale.gather(1, index).squeeze(1),
          h.shift.gather(1, index.unsqueeze(2).expand({-1, 1, 2})).squeeze(1)};
}

// The images [M, 1, S, S], and their derivatives along x and y in normalised units: [M, 3, S, S].
at::Tensor with_derivatives(const at::Tensor& images) {
  const std::int64_t side = images.size(3);
  const at::Tensor padded = at::replication_pad2d(images, {1, 1, 1, 1});
  const double per_unit = static_cast<double>(side) / 4;  // central difference over 2 pixels = 4 / S units
  const at::Tensor dx = (padded.narrow(3, 2, side) - padded.narrow(3, 0, side)).narrow(2, 1, side) * per_unit;
  const at::Tensor dy = (padded.narrow(2, 2, side) - padded.narrow(2, 0, side)).narrow(3, 1, side) * per_unit;
  return at::cat({images, dx, dy}, 1);
}

// From `start` (shift normalised), Gauss-Newton steps on rotation, scale, shift and a gain and offset of
// the second image's grey levels: least squares on the shared pixels, which maximises their correlation.
// Keeps the best transform seen.
Alignment refined(const at::Tensor& first, const at::Tensor& second, const at::Tensor& points, Alignment best) {
  const at::Tensor images = with_derivatives(second);
  at::Tensor rotation = best.rotation.clone(), scale = best.scale.clone(), shift = best.shift.clone();
  at::Tensor gain, offset;
  for (int step = 0; step <= refinement_steps; ++step) {
    const Mapped q = mapped(rotation, scale, shift, points);
    const at::Tensor values = sampled(images, q).squeeze(2);  // [M, 3, P]
    const at::Tensor b = values.select(1, 0), bx = values.select(1, 1), by = values.select(1, 2);
    const at::Tensor w = inside(q, second.size(3));
    const at::Tensor correlation = masked_correlation(first, b, w);
    const at::Tensor better = correlation > best.correlation;
    best = {at::where(better, correlation, best.correlation), at::where(better, rotation, best.rotation),
            at::where(better, scale, best.scale), at::where(better.unsqueeze(1), shift, best.shift)};
    if (step == refinement_steps) break;
    if (!gain.defined()) {  // the least-squares gain and offset of the starting transform
      const at::Tensor n = w.sum(1, true).clamp_min(1), ma = (first * w).sum(1, true) / n, mb = (b * w).sum(1, true) / n;
      gain = (((first - ma) * (b - mb) * w).sum(1, true) / (((b - mb).pow(2) * w).sum(1, true)).clamp_min(1e-9));
      offset = ma - gain * mb;
    }
    const at::Tensor s = scale.unsqueeze(1);
    const at::Tensor jacobian = at::stack({gain * (by * q.rx - bx * q.ry) * s * radians_per_degree,  // [M, P, 6]
                                           gain * (bx * q.rx + by * q.ry), gain * bx, gain * by, b, at::ones_like(b)}, 2);
    const at::Tensor residual = (gain * b + offset - first) * w;
    const at::Tensor jw = jacobian * w.unsqueeze(2);
    at::Tensor curvature = at::matmul(jw.transpose(1, 2), jacobian);
    curvature = curvature + at::diag_embed(curvature.diagonal(0, 1, 2) * damping + 1e-9);
    const at::Tensor slope = at::matmul(jw.transpose(1, 2), residual.unsqueeze(2));
    const at::Tensor delta = -at::linalg_solve(curvature, slope).squeeze(2);
    rotation = (rotation + delta.select(1, 0)).clamp(-max_rotation_degrees - 2, max_rotation_degrees + 2);
    scale = (scale + delta.select(1, 1)).clamp(min_scale, max_scale);
    shift = shift + delta.narrow(1, 2, 2);
    gain = gain + delta.select(1, 4).unsqueeze(1), offset = offset + delta.select(1, 5).unsqueeze(1);
  }
  return best;
}

// The images [M, 1, S, S] at `points` (no transform): [M, P].
at::Tensor values_at(const at::Tensor& images, const at::Tensor& points) {
  const at::Tensor none = at::zeros({images.size(0), 1});
  return sampled(images, mapped(none, at::ones({images.size(0), 1}), at::zeros({images.size(0), 1, 2}), points))
      .squeeze(1).squeeze(1);
}

Alignment subset(const Alignment& a, const at::Tensor& index) {
  return {a.correlation.index_select(0, index), a.rotation.index_select(0, index), a.scale.index_select(0, index),
          a.shift.index_select(0, index)};
}

// How much of the second image's white-noise variance its bilinear samples keep: 1 at pixel centres, 1/4
// midway between four of them; averaged over the shared points w.
at::Tensor resampled_noise(const Mapped& q, std::int64_t side, const at::Tensor& w) {
  const auto kept = [&](const at::Tensor& x) {
    const at::Tensor u = ((x + 1) * static_cast<double>(side) - 1) / 2, f = u - u.floor();
    return (1 - f).pow(2) + f.pow(2);
  };
  return (kept(q.x) * kept(q.y) * w).sum(1) / w.sum(1).clamp_min(1);
}

// The raw images of the pairs at `index` under their transforms: correlation on the shared pixels, each
// image's variance less what its noise explains (at most half of it: a noise estimate never makes shapes
// alike); above 1 where the noise is overestimated.
at::Tensor score(const PairBatch& pairs, const at::Tensor& index, const Alignment& a, const at::Tensor& points,
                 bool allow_for_noise = true) {
  const at::Tensor second = pairs.second.index_select(0, index);
  const Mapped q = mapped(a.rotation, a.scale, a.shift, points);
  const at::Tensor x = pairs.first.index_select(0, index).reshape({index.size(0), -1});
  const at::Tensor y = sampled(second, q).squeeze(2).squeeze(1), w = inside(q, second.size(3));
  const at::Tensor n = w.sum(1).clamp_min(1);
  const at::Tensor dx = (x - (x * w).sum(1, true) / n.unsqueeze(1)) * w;
  const at::Tensor dy = (y - (y * w).sum(1, true) / n.unsqueeze(1)) * w;
  const at::Tensor vx = (dx * dx).sum(1) / n, vy = (dy * dy).sum(1) / n;
  const double allowed = allow_for_noise ? 1.0 : 0.0;
  const at::Tensor noise_x = pairs.first_noise.index_select(0, index).pow(2) * allowed;
  const at::Tensor noise_y = pairs.second_noise.index_select(0, index).pow(2) * resampled_noise(q, second.size(3), w) * allowed;
  const at::Tensor signal = at::max(vx - noise_x, vx / 2) * at::max(vy - noise_y, vy / 2);
  const at::Tensor r = (dx * dy).sum(1) / n / signal.sqrt().clamp_min(1e-12);
  const at::Tensor usable = (n >= min_shared_area * static_cast<double>(points.size(0))) & (vx > flat_variance) &
                            (vy > flat_variance);
  return at::where(usable, r, at::full({}, -1.0, r.options()));
}

// The refined transforms `fine` (shift normalised) with their scores, or the nearest whole-pixel shift
// where its plain correlation is as high (see plain_shift_tolerance): a shifted copy is reported as one.
Alignment plainest(const PairBatch& pairs, const at::Tensor& index, const Alignment& fine, const at::Tensor& points) {
  const double pixel = 2.0 / static_cast<double>(pairs.first.size(3));
  const Alignment plain{fine.correlation, at::zeros_like(fine.rotation), at::ones_like(fine.scale),
                        (fine.shift / pixel).round() * pixel};
  const at::Tensor refined = score(pairs, index, fine, points, false);
  const at::Tensor tolerance = ((1 - refined) * plain_shift_share).clamp_min(plain_shift_tolerance);
  const at::Tensor take = score(pairs, index, plain, points, false) >= refined - tolerance;
  return {at::where(take, score(pairs, index, plain, points), score(pairs, index, fine, points)),
          at::where(take, plain.rotation, fine.rotation),
          at::where(take, plain.scale, fine.scale), at::where(take.unsqueeze(1), plain.shift, fine.shift)};
}

}  // namespace

at::Tensor pixel_centres(std::int64_t side) {
  const at::Tensor c = (at::arange(side, at::kFloat) * 2 + 1) / static_cast<double>(side) - 1;
  return at::stack({c.repeat({side}), c.repeat_interleave(side)}, 1);
}

Alignment align_pairs(const PairBatch& pairs, double refine_from) {
  const std::int64_t side = pairs.first.size(3);
  const at::Tensor coarse_points = pixel_centres(side >= 16 ? side / 2 : side);
  Alignment best = best_hypothesis(values_at(pairs.first_smooth, coarse_points), coarse_points, pairs.second_smooth,
                                   coarse_hypotheses(pairs, side));
  const at::Tensor points = pixel_centres(side);
  const at::Tensor refine = (best.correlation >= refine_from).nonzero().squeeze(1);
  best.correlation.fill_(-1);
  constexpr std::int64_t chunk = 512;
  for (std::int64_t i = 0; i < refine.size(0); i += chunk) {
    const at::Tensor index = refine.narrow(0, i, std::min(chunk, refine.size(0) - i));
    Alignment start = subset(best, index);
    start.correlation.fill_(-2);  // the coarse one is of half-size images: measured again at full size
    const at::Tensor first = pairs.first_smooth.index_select(0, index).reshape({index.size(0), -1});
    const Alignment fine = plainest(pairs, index, refined(first, pairs.second_smooth.index_select(0, index), points, start),
                                    points);
    best.correlation.index_copy_(0, index, fine.correlation.clamp_max(1));
    best.rotation.index_copy_(0, index, fine.rotation);
    best.scale.index_copy_(0, index, fine.scale);
    best.shift.index_copy_(0, index, fine.shift);
  }
  best.shift = best.shift * (static_cast<double>(side) / 2);
  return best;
}

}  // namespace privdiff::core
