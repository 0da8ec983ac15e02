#pragma once
// The record-replay sensitivity audit (record_replay.hpp) of DP-FETA's central images: the mean and
// mode queries, and whole releases, on a subsample and on it plus x with the same noise.
#include "record_replay.hpp"

#include <privdiff/engine/central_images.hpp>
#include <privdiff/engine/gaussian_noise.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace privdiff::testing::replay {

// D of the central-image replays: N = 23 records of 1x4x4 in two classes. `dark` for the mean (p in
// [0, 0.05]: no class mean reaches 1, nothing is clamped, the release inverts), `uniform` for the
// mode (x's one count can move a pixel's mode); `gen` draws the random neighbours after them.
struct CentralReplayData {
  static constexpr std::int64_t n = 23, classes = 2;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(41);
  at::Tensor dark = (at::rand({n, 1, 4, 4}, gen) * 0.1 - 1).to(at::kFloat);
  at::Tensor uniform = (at::rand({n, 1, 4, 4}, gen) * 2 - 1).to(at::kFloat);
  at::Tensor labels = at::arange(n, at::kLong).remainder(classes);
};

// ---------------------------------------------------------------------------------------------
// Central images (DP-FETA): the queries and whole releases

/// One mean query's release from a subsample (engine::central_mean, or a planted bug).
using MeanQuery = std::function<at::Tensor(const at::Tensor& sampled, const at::Tensor& labels,
                                           const std::vector<double>& class_sizes,
                                           const engine::CentralImageOptions&, engine::GaussianNoise&)>;
/// One mode query's release (engine::central_mode, or a planted bug).
using ModeQuery = std::function<at::Tensor(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                           const engine::CentralImageOptions&, engine::GaussianNoise&)>;

/// The mean query on a subsample and on it plus x (x: [C, r, r] in [0, 1]), with the same noise:
/// per class, (release(D + x) - release(D)) times the public divisor q N_class is x's image in x's
/// class and zero elsewhere: its L2 norm must be at most Delta = sqrt(C r^2), and no other class's
/// release may move (the per-class parallel composition the event assumes).
inline Report audit_central_mean(const MeanQuery& query, const engine::CentralImageOptions& o, const at::Tensor& sampled,
                                 const at::Tensor& labels, const std::vector<double>& class_sizes,
                                 const std::vector<Neighbour>& neighbours, std::uint64_t noise_seed) {
  Report report;
  const double delta = engine::central_mean_sensitivity(sampled.size(1), sampled.size(2));
  const auto classes = static_cast<std::int64_t>(class_sizes.size());
  const at::Tensor divisor = at::tensor(class_sizes, at::kDouble).view({classes, 1, 1, 1}) * o.sampling_rate;
  auto noise = engine::GaussianNoise::seeded(noise_seed);
  const at::Tensor on_d = query(sampled, labels, class_sizes, o, noise);
  for (const Neighbour& x : neighbours) {
    const std::string what = "central mean query, x = " + x.name;
    auto same_noise = engine::GaussianNoise::seeded(noise_seed);
    const at::Tensor on_x = query(at::cat({sampled, x.image.to(sampled.scalar_type()).unsqueeze(0)}),
                                  at::cat({labels, at::full({1}, x.label, at::kLong)}), class_sizes, o, same_noise);
    distance_between(what, {on_d * divisor}, {on_x * divisor}, 1.0, delta, 1e-9, 0.0, report,
                     x.image.to(at::kDouble).norm().item<double>());
    if (on_d.sizes() == on_x.sizes()) {
      for (std::int64_t c = 0; c < classes; ++c) {
        if (c != x.label && !at::equal(on_d[c], on_x[c])) {
          report.add(what + ": the release of class " + std::to_string(c) + " moved, though x is in class " +
                     std::to_string(x.label));
        }
      }
    }
  }
  return report;
}

/// The per-pixel histograms the mode query declares: counts[class, pixel, bin] of p in `bins`
/// equal bins over [0, 1] (the top edge in the last bin).
inline at::Tensor declared_histograms(const at::Tensor& sampled, const at::Tensor& labels, std::int64_t classes,
                                      std::int64_t bins) {
  const at::Tensor p = sampled.to(at::kDouble).flatten(1);
  const std::int64_t dims = p.size(1);
  at::Tensor counts = at::zeros({classes, dims, bins}, at::kDouble);
  for (std::int64_t i = 0; i < p.size(0); ++i) {
    const std::int64_t c = labels[i].item<std::int64_t>();
    for (std::int64_t j = 0; j < dims; ++j) {
      const auto b = std::min<std::int64_t>(bins - 1, static_cast<std::int64_t>(std::floor(p[i][j].item<double>() * bins)));
      counts[c][j][b] += 1;
    }
  }
  return counts;
}

/// The mode query on a subsample and on it plus x, with the same noise. The release is a noisy
/// argmax, so the harness replays the declared noise (the query's first draw of the seeded
/// stream: N(0, (sigma sqrt(d))^2) per count) over the declared histograms and checks:
///  - fidelity: release(D) is the argmax of D's histograms plus that noise;
///  - sensitivity: on D + x only x's class moves, each pixel only to x's bin, and only where x's one
///    count (the declared per-histogram sensitivity 1, L2 sqrt(d) over the d pixels) can make that
///    bin win: the count a flip implies, max_k(n_k + z_k) - (n_b + z_b), is at most 1.
inline Report audit_central_mode(const ModeQuery& query, const engine::CentralImageOptions& o, const at::Tensor& sampled,
                                 const at::Tensor& labels, std::int64_t classes,
                                 const std::vector<Neighbour>& neighbours, std::uint64_t noise_seed) {
  Report report;
  const std::int64_t dims = sampled[0].numel(), bins = o.bins;
  const at::Tensor counts = declared_histograms(sampled, labels, classes, bins);
  const at::Tensor z = engine::GaussianNoise::seeded(noise_seed)
                           .sample(at::zeros({classes * dims * bins}, at::kDouble),
                                   o.noise_multiplier * std::sqrt(static_cast<double>(dims)))
                           .view({classes, dims, bins});
  const at::Tensor noisy = counts + z;
  auto winners = [&](const at::Tensor& release) {  // midpoints -> bin indices [classes, dims]
    return (release.to(at::kDouble).reshape({classes, dims}) * bins - 0.5).round().to(at::kLong);
  };
  auto noise = engine::GaussianNoise::seeded(noise_seed);
  const at::Tensor on_d = winners(query(sampled, labels, classes, o, noise));
  if (!at::equal(on_d, noisy.argmax(2))) {
    report.add("central mode query: the release on D is not the noisy argmax of the declared histograms (" +
               std::to_string(on_d.ne(noisy.argmax(2)).sum().item<std::int64_t>()) +
               " pixels differ): the counts or the noise are not what the mechanism declares");
  }
  for (const Neighbour& x : neighbours) {
    const std::string what = "central mode query, x = " + x.name;
    auto same_noise = engine::GaussianNoise::seeded(noise_seed);
    const at::Tensor on_x = winners(query(at::cat({sampled, x.image.to(sampled.scalar_type()).unsqueeze(0)}),
                                          at::cat({labels, at::full({1}, x.label, at::kLong)}), classes, o, same_noise));
    const at::Tensor x_bins =
        (x.image.to(at::kDouble).flatten() * bins).floor().clamp(0, bins - 1).to(at::kLong);  // [dims]
    double implied = 0;
    std::int64_t flips = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      for (std::int64_t j = 0; j < dims; ++j) {
        const std::int64_t before = on_d[c][j].item<std::int64_t>(), after = on_x[c][j].item<std::int64_t>();
        if (before == after) continue;
        if (c != x.label) {
          report.add(what + ": class " + std::to_string(c) + " pixel " + std::to_string(j) + " moved, though x is in class " +
                     std::to_string(x.label));
          continue;
        }
        if (after != x_bins[j].item<std::int64_t>()) {
          report.add(what + ": pixel " + std::to_string(j) + " moved to bin " + std::to_string(after) +
                     ", where x does not fall");
          continue;
        }
        ++flips;
        implied = std::max(implied, noisy[c][j].max().item<double>() - noisy[c][j][after].item<double>());
      }
    }
    report.measurements.push_back({what + " (" + std::to_string(flips) + " pixels flipped)", implied, 1.0, std::nan("")});
    if (implied > 1 + 1e-9) {
      report.add(what + ": a pixel's mode moved to x's bin where that takes " + std::to_string(implied) +
                 " counts, more than x's one count per pixel histogram (L2 sensitivity sqrt(d))");
    }
  }
  return report;
}

/// Whole releases (release_central_images or the central_images mechanism) on D (N records) and
/// D ∪ {x}: the same number of images, shapes and labels; per query and class, for the mean (with
/// post_process off, resolution = the image size and noise too small to clamp, so the release
/// inverts to p = (image + 1) / 2), (p' q (N + 1) / classes - p q N / classes) has L2 norm at most
/// Delta over each query, and is zero outside x's class; for the mode, only x's class moves, and
/// only to x's bins.
inline Report compare_central_releases(const std::string& name, const engine::CentralImageOptions& o,
                                       const engine::CentralImages& d, const engine::CentralImages& dx,
                                       const Neighbour& x, std::int64_t n, std::int64_t classes) {
  Report report;
  const std::string what = name + ", x = " + x.name;
  if (d.images.sizes() != dx.images.sizes() || d.images.scalar_type() != dx.images.scalar_type()) {
    report.add(what + ": released " + shape_of(d.images) + " on D, " + shape_of(dx.images) + " on D + x");
    return report;
  }
  if (!at::equal(d.labels, dx.labels)) report.add(what + ": the released labels differ");
  const std::int64_t queries = d.images.size(0) / classes;
  const at::Tensor p = (d.images.to(at::kDouble) + 1) / 2, px = (dx.images.to(at::kDouble) + 1) / 2;
  if (o.statistic == engine::CentralStatistic::mean) {
    const double delta = engine::central_mean_sensitivity(d.images.size(1), o.resolution);
    const double div = o.sampling_rate * static_cast<double>(n) / static_cast<double>(classes);
    const double div_x = o.sampling_rate * static_cast<double>(n + 1) / static_cast<double>(classes);
    for (std::int64_t q = 0; q < queries; ++q) {
      const at::Tensor sums = p.narrow(0, q * classes, classes) * div, sums_x = px.narrow(0, q * classes, classes) * div_x;
      distance_between(what + ", query " + std::to_string(q), {sums}, {sums_x}, 1.0, delta, 1e-4, 0.0, report);
      for (std::int64_t c = 0; c < classes; ++c) {
        if (c != x.label && !at::allclose(sums[c], sums_x[c], 1e-5, 1e-5)) {
          report.add(what + ", query " + std::to_string(q) + ": class " + std::to_string(c) + " moved");
        }
      }
    }
  } else {
    const at::Tensor x_mid = ((x.image.to(at::kDouble) + 1) / 2 * o.bins).floor().clamp(0, o.bins - 1).add(0.5) / o.bins;
    for (std::int64_t q = 0; q < queries; ++q) {
      for (std::int64_t c = 0; c < classes; ++c) {
        const at::Tensor a = p[q * classes + c], b = px[q * classes + c];
        const at::Tensor moved = (a - b).abs() > 1e-5;
        if (c == x.label) {
          report.measurements.push_back({what + ", query " + std::to_string(q) + ": pixels whose mode moved",
                                         moved.sum().item<double>(), static_cast<double>(a.numel()), std::nan("")});
        }
        if (!moved.any().item<bool>()) continue;
        if (c != x.label) {
          report.add(what + ", query " + std::to_string(q) + ": class " + std::to_string(c) + " moved");
        } else if (!((b - x_mid).abs() < 1e-5).masked_select(moved).all().item<bool>()) {
          report.add(what + ", query " + std::to_string(q) + ": a pixel moved to a bin where x does not fall");
        }
      }
    }
  }
  return report;
}

}  // namespace privdiff::testing::replay
