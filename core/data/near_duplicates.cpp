#include "data/near_duplicates.hpp"

#include "data/image_alignment.hpp"
#include "data/image_descriptors.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

namespace privdiff::core {

namespace {

constexpr std::int64_t max_side = 32;     // compared at most at 32 x 32
constexpr std::int64_t shortlist = 24;    // candidates per record by descriptor, then ranked by polar match
constexpr std::int64_t candidates_per_image = 8;  // of those, aligned
constexpr double candidate_cosine = 0.5;  // of descriptors: far below what a near-duplicate's scores
constexpr double smoothing = 1.0;         // pixels: the Gaussian the alignment looks through
constexpr double refine_margin = 0.045;   // coarse alignments (smoothed) this close to the threshold are refined
// The scales a record is described at as a query (about the centroid, about the frame's centre): padded
// or shrunk, as is, cropped or enlarged.
const std::vector<double> centroid_scales{0.93, 1.0, 1.075}, frame_scales{0.875, 1.0, 1.0 / 0.875};

struct Prepared {
  at::Tensor grey;      // [N, S, S] uint8 at its size (bounded memory: one byte a pixel)
  at::Tensor centre;    // [N, 2]
  at::Tensor radius;    // [N]
  at::Tensor noise;     // [N] estimated standard deviation of additive noise, grey in [0, 1]
  at::Tensor about_centroid;  // [N, views, D] polar descriptors about the centroid: at each scale (queries), or 1
  at::Tensor about_frame;     // [N, views, D] about the frame's centre, likewise
  at::Tensor samples;         // (not queries) [N, 2, rings, angles] float16: polar samples about each anchor
};

Prepared prepare(const sdk::Dataset& data, std::int64_t side, bool query) {
  std::vector<at::Tensor> grey, centre, radius, noise, about_centroid, about_frame, samples;
  constexpr std::int64_t chunk = 4096;
  for (std::int64_t start = 0; start < data.size(); start += chunk) {
    const at::Tensor indices = at::arange(start, std::min(data.size(), start + chunk), at::kLong);
    at::Tensor g = (data.images(indices).to(at::kCPU).to(at::kFloat).mean(1, true) + 1) / 2;
    if (g.size(2) != side || g.size(3) != side) g = at::adaptive_avg_pool2d(g, {side, side});
    const at::Tensor smooth = smoothed(g, smoothing);
    const Shape shape = shape_of(smooth);
    const at::Tensor flat = shape.flat.unsqueeze(1);
    const auto described = [&](Anchor anchor, double scale) {  // flat images match nothing
      const at::Tensor polar = polar_samples(smooth, shape, anchor, at::scalar_tensor(scale));
      if (!query && scale == 1.0) samples.push_back(polar.to(at::kHalf));
      return at::where(flat, at::zeros({}), polar_descriptors(polar));
    };
    std::vector<at::Tensor> centroid_views, frame_views;
    for (const double scale : query ? centroid_scales : std::vector<double>{1.0}) {
      centroid_views.push_back(described(Anchor::centroid, scale));
    }
    for (const double scale : query ? frame_scales : std::vector<double>{1.0}) {
      frame_views.push_back(described(Anchor::frame, scale));
    }
    grey.push_back((g * 255).round().clamp(0, 255).to(at::kByte).squeeze(1));
    centre.push_back(shape.centre);
    radius.push_back(shape.radius);
    noise.push_back(noise_level(g));
    about_centroid.push_back(at::stack(centroid_views, 1));
    about_frame.push_back(at::stack(frame_views, 1));
  }
  Prepared out{at::cat(grey), at::cat(centre), at::cat(radius), at::cat(noise), at::cat(about_centroid),
               at::cat(about_frame), at::Tensor()};
  if (!query) {  // pushed about the centroid, then the frame, chunk by chunk
    std::vector<at::Tensor> centroid, frame;
    for (std::size_t i = 0; i < samples.size(); i += 2) centroid.push_back(samples[i]), frame.push_back(samples[i + 1]);
    out.samples = at::stack({at::cat(centroid), at::cat(frame)}, 1);
  }
  return out;
}

struct Candidates {
  at::Tensor first, second;  // [M] int64: index in a, index in b
  at::Tensor rotation, mirrored;  // [M]: the polar match's estimate
};

// The `k` best of `score` [R, C] per row, merged into (best_score, best_index) [R, <= k].
void keep_best(const at::Tensor& score, std::int64_t offset, std::int64_t k, at::Tensor& best_score, at::Tensor& best_index) {
  auto [value, index] = score.topk(std::min(k, score.size(1)), 1);
  index = index + offset;
  if (best_score.defined()) {
    value = at::cat({best_score, value}, 1), index = at::cat({best_index, index}, 1);
    const auto top = value.topk(std::min(k, value.size(1)), 1);
    value = std::get<0>(top), index = index.gather(1, std::get<1>(top));
  }
  best_score = value, best_index = index;
}

// For each record of a, the records of b whose descriptors are closest under any view (about the
// centroid, or about the frame's centre at each scale): [rows of a, shortlist] indices, or -1.
at::Tensor shortlisted(const Prepared& a, const Prepared& b, std::int64_t from, std::int64_t count) {
  constexpr std::int64_t b_block = 8192;
  at::Tensor best_score, best_index;
  const at::Tensor centroid = a.about_centroid.narrow(0, from, count), frame = a.about_frame.narrow(0, from, count);
  for (std::int64_t j = 0; j < b.grey.size(0); j += b_block) {
    const std::int64_t n = std::min(b_block, b.grey.size(0) - j);
    at::Tensor score;
    for (const auto& [mine, theirs] : {std::pair{centroid, b.about_centroid}, std::pair{frame, b.about_frame}}) {
      const at::Tensor other = theirs.narrow(0, j, n).select(1, 0).t();
      for (std::int64_t v = 0; v < mine.size(1); ++v) {
        const at::Tensor s = at::mm(mine.select(1, v), other);
        score = score.defined() ? at::max(score, s) : s;
      }
    }
    keep_best(score, j, shortlist, best_score, best_index);
  }
  return at::where(best_score >= candidate_cosine, best_index, at::full({}, -1, at::kLong));
}

// How well the content of a's records (`first`, of the block from `from`, whose smoothed images are
// `mine`) matches b's, rotated and perhaps mirrored: about the centroids (a's rings scaled by the ratio
// of the radii), or about the frames' centres at each of a's scales.
PolarMatch polar_match(const Prepared& a, const Prepared& b, const at::Tensor& mine, std::int64_t from,
                       const at::Tensor& first, const at::Tensor& second) {
  const at::Tensor local = first - from;
  const at::Tensor ratio = (a.radius.index_select(0, first) / b.radius.index_select(0, second)).clamp(min_scale, max_scale);
  const Shape shape{a.centre.index_select(0, first), a.radius.index_select(0, first), at::Tensor()};
  const at::Tensor theirs = b.samples.index_select(0, second).to(at::kFloat);
  PolarMatch best = match_polar(polar_samples(mine.index_select(0, local), shape, Anchor::centroid, ratio), theirs.select(1, 0));
  const Shape block{a.centre.narrow(0, from, mine.size(0)), a.radius.narrow(0, from, mine.size(0)), at::Tensor()};
  for (const double scale : frame_scales) {
    const at::Tensor framed = polar_samples(mine, block, Anchor::frame, at::scalar_tensor(scale)).index_select(0, local);
    const PolarMatch m = match_polar(framed, theirs.select(1, 1));
    const at::Tensor better = m.correlation > best.correlation;
    best = {at::where(better, m.correlation, best.correlation), at::where(better, m.rotation, best.rotation),
            at::where(better, m.mirrored, best.mirrored)};
  }
  return best;
}

// The shortlist ranked by polar_match: the best few per record, with the match's estimates.
Candidates candidate_pairs(const Prepared& a, const Prepared& b) {
  std::vector<at::Tensor> firsts, seconds, rotations, mirrors;
  constexpr std::int64_t a_block = 512;
  for (std::int64_t i = 0; i < a.grey.size(0); i += a_block) {
    const std::int64_t count = std::min(a_block, a.grey.size(0) - i);
    const at::Tensor list = shortlisted(a, b, i, count);
    const at::Tensor row = (at::arange(count, at::kLong) + i).unsqueeze(1).expand_as(list);
    const at::Tensor keep = list >= 0;
    const at::Tensor first = row.masked_select(keep), second = list.masked_select(keep);
    if (first.numel() == 0) continue;
    const at::Tensor mine = smoothed(a.grey.narrow(0, i, count).unsqueeze(1).to(at::kFloat) / 255, smoothing);
    const PolarMatch match = polar_match(a, b, mine, i, first, second);
    // The best few per record: its rows are contiguous in `first`, `shortlist` at most each.
    at::Tensor score = at::full({count, shortlist}, -2.0);
    const at::Tensor slot = keep.to(at::kLong).cumsum(1) - 1;
    score.index_put_({row.masked_select(keep) - i, slot.masked_select(keep)}, match.correlation);
    const at::Tensor pick = std::get<1>(score.topk(std::min(candidates_per_image, shortlist), 1));
    at::Tensor position = at::full({count, shortlist}, -1, at::kLong);
    position.index_put_({row.masked_select(keep) - i, slot.masked_select(keep)}, at::arange(first.size(0), at::kLong));
    const at::Tensor chosen = position.gather(1, pick).reshape(-1);
    const at::Tensor valid = chosen.masked_select(chosen >= 0);
    firsts.push_back(first.index_select(0, valid));
    seconds.push_back(second.index_select(0, valid));
    rotations.push_back(match.rotation.index_select(0, valid));
    mirrors.push_back(match.mirrored.index_select(0, valid));
  }
  if (firsts.empty()) {
    return {at::zeros({0}, at::kLong), at::zeros({0}, at::kLong), at::zeros({0}), at::zeros({0}, at::kBool)};
  }
  return {at::cat(firsts), at::cat(seconds), at::cat(rotations), at::cat(mirrors)};
}

// The candidate pairs from `start`, `count` of them, aligned (b's image mirrored where the match says).
Alignment aligned(const Prepared& a, const Prepared& b, const Candidates& pairs, std::int64_t start,
                  std::int64_t count, double threshold) {
  const at::Tensor first = pairs.first.narrow(0, start, count), second = pairs.second.narrow(0, start, count);
  const at::Tensor mirrored = pairs.mirrored.narrow(0, start, count);
  const at::Tensor centre = b.centre.index_select(0, second);
  const auto oriented = [&](const at::Tensor& images) {
    return at::where(mirrored.view({-1, 1, 1, 1}), images.flip(3), images);
  };
  PairBatch batch;
  batch.first = a.grey.index_select(0, first).unsqueeze(1).to(at::kFloat) / 255;
  batch.second = oriented(b.grey.index_select(0, second).unsqueeze(1).to(at::kFloat) / 255);
  batch.first_smooth = smoothed(batch.first, smoothing);
  batch.second_smooth = smoothed(batch.second, smoothing);
  batch.first_centre = a.centre.index_select(0, first);
  batch.second_centre = at::where(mirrored.view({-1, 1}), centre * at::tensor({-1.0f, 1.0f}), centre);
  batch.first_radius = a.radius.index_select(0, first);
  batch.second_radius = b.radius.index_select(0, second);
  batch.first_noise = a.noise.index_select(0, first);
  batch.second_noise = b.noise.index_select(0, second);
  batch.rotation = pairs.rotation.narrow(0, start, count);
  return align_pairs(batch, threshold - refine_margin);
}

std::string number(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  std::string s = text;
  if (digits > 0 && s.find('.') != std::string::npos && digits < 4) {  // 1.50 -> 1.5, 2.0 -> 2
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

}  // namespace

std::string NearDuplicate::how() const {
  std::vector<std::string> changes;
  if (std::abs(rotation) >= 0.05) {
    changes.push_back(std::string("rotated ") + (rotation > 0 ? "clockwise" : "anticlockwise") + " by " +
                      number(std::abs(rotation), 1) + " degrees");
  }
  if (std::abs(scale - 1) >= 0.005) changes.push_back("scaled by " + number(scale, 2));
  if (std::abs(shift_x) >= 0.05 || std::abs(shift_y) >= 0.05) {
    changes.push_back("shifted by (" + number(shift_x, 1) + ", " + number(shift_y, 1) + ") pixels");
  }
  std::string text = mirrored ? "a mirror image" : "the same image";
  for (std::size_t i = 0; i < changes.size(); ++i) {
    text += (i == 0 ? " " : i + 1 == changes.size() ? " and " : ", ") + changes[i];
  }
  return text + ", correlation " + number(correlation, 4) + " after normalisation";
}

std::vector<NearDuplicate> find_near_duplicates(const sdk::Dataset& a, const sdk::Dataset& b, double threshold,
                                                std::ostream* log) {
  if (a.size() == 0 || b.size() == 0) return {};
  const at::Tensor one = at::zeros({1}, at::kLong);
  const at::Tensor sa = a.images(one), sb = b.images(one);
  // Each at its own size (at most 32 x 32): the alignment maps one onto the other, so a copy padded or
  // resized to another size is not resampled twice.
  const std::int64_t side_a = std::min({sa.size(2), sa.size(3), max_side});
  const std::int64_t side_b = std::min({sb.size(2), sb.size(3), max_side});
  if (log && a.size() * b.size() > 100'000'000) {
    *log << "checking " << a.size() << " x " << b.size() << " records for near-duplicates\n" << std::flush;
  }
  const Prepared pa = prepare(a, side_a, true), pb = prepare(b, side_b, false);
  const Candidates pairs = candidate_pairs(pa, pb);
  std::map<std::int64_t, NearDuplicate> best;
  constexpr std::int64_t batch = 2048;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  for (std::int64_t i = 0; i < pairs.first.size(0); i += batch) {
    const std::int64_t n = std::min(batch, pairs.first.size(0) - i);
    // Progress as time alone: how many pairs are candidates, or how far through them, depends on the
    // private images (docs/privacy.md: such counts appear only in refusals).
    if (log && std::chrono::steady_clock::now() - last > std::chrono::seconds(10)) {
      last = std::chrono::steady_clock::now();
      *log << "  near-duplicates: still aligning candidate pairs ("
           << std::chrono::duration_cast<std::chrono::seconds>(last - start).count() << " s)\n" << std::flush;
    }
    const Alignment al = aligned(pa, pb, pairs, i, n, threshold);
    const at::Tensor found = (al.correlation >= threshold).nonzero().squeeze(1);
    for (std::int64_t f = 0; f < found.size(0); ++f) {
      const std::int64_t j = found[f].item<std::int64_t>();
      NearDuplicate d;
      d.first = pairs.first[i + j].item<std::int64_t>();
      d.second = pairs.second[i + j].item<std::int64_t>();
      d.mirrored = pairs.mirrored[i + j].item<bool>();
      d.correlation = al.correlation[j].item<double>();
      d.rotation = al.rotation[j].item<double>();
      d.scale = al.scale[j].item<double>();
      d.shift_x = al.shift[j][0].item<double>(), d.shift_y = al.shift[j][1].item<double>();
      auto [slot, added] = best.emplace(d.first, d);
      if (!added && d.correlation > slot->second.correlation) slot->second = d;
    }
  }
  std::vector<NearDuplicate> out;
  for (auto& [index, d] : best) out.push_back(d);
  return out;
}

std::optional<NearDuplicate> find_near_duplicate(const sdk::Dataset& a, const sdk::Dataset& b, double threshold,
                                                 std::ostream* log) {
  const std::vector<NearDuplicate> all = find_near_duplicates(a, b, threshold, log);
  const auto most = std::max_element(all.begin(), all.end(), [](const NearDuplicate& x, const NearDuplicate& y) {
    return x.correlation < y.correlation;
  });
  if (most == all.end()) return std::nullopt;
  return *most;
}

}  // namespace privdiff::core
