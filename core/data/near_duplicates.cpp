#include "data/near_duplicates.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace privdiff::core {

namespace {

constexpr std::int64_t max_side = 32;        // compared at most at 32 x 32
constexpr std::int64_t grid = 8;             // the candidates' descriptor: 8 x 8 means
constexpr std::int64_t candidates_per_image = 4;
constexpr double candidate_cosine = 0.8;     // far below what a near-duplicate's descriptor scores
constexpr double flat_std = 0.01;            // (pixels in [-1, 1]) about one grey level: no shape

// Every image of `data` in grey levels, [N, h, w] float, resized (area means) where it is not h x w.
at::Tensor grey_images(const sdk::Dataset& data, std::int64_t h, std::int64_t w) {
  std::vector<at::Tensor> parts;
  constexpr std::int64_t chunk = 4096;
  for (std::int64_t start = 0; start < data.size(); start += chunk) {
    const at::Tensor indices = at::arange(start, std::min(data.size(), start + chunk), at::kLong);
    at::Tensor grey = data.images(indices).to(at::kCPU).to(at::kFloat).mean(1);
    if (grey.size(1) != h || grey.size(2) != w) grey = at::adaptive_avg_pool2d(grey.unsqueeze(1), {h, w}).squeeze(1);
    parts.push_back(grey.contiguous());
  }
  return parts.empty() ? at::zeros({0, h, w}) : at::cat(parts);
}

// Rows centred and scaled to norm 1; rows of (nearly) one value have no shape and become 0.
at::Tensor normalised(const at::Tensor& rows) {
  const at::Tensor centred = rows - rows.mean(1, true);
  const at::Tensor norm = at::linalg_vector_norm(centred, 2, {1}, true);
  const double flat = flat_std * std::sqrt(static_cast<double>(rows.size(1)));
  return at::where(norm > flat, centred / norm.clamp_min(1e-12), at::zeros({}, rows.options()));
}

at::Tensor descriptors(const at::Tensor& grey) {
  return normalised(at::adaptive_avg_pool2d(grey.unsqueeze(1), {grid, grid}).reshape({grey.size(0), -1}));
}

struct Candidates {
  at::Tensor first, second;  // [M] int64: index in a, index in b's descriptors (>= N_b: mirrored)
};

// For each image of a, its closest descriptors among b's and b's mirror images, when close enough.
Candidates candidate_pairs(const at::Tensor& da, const at::Tensor& db) {
  std::vector<at::Tensor> firsts, seconds;
  constexpr std::int64_t a_block = 1024, b_block = 16384;
  const std::int64_t k = std::min<std::int64_t>(candidates_per_image, db.size(0));
  for (std::int64_t i = 0; i < da.size(0) && k > 0; i += a_block) {
    const at::Tensor rows = da.narrow(0, i, std::min(a_block, da.size(0) - i));
    at::Tensor best_score, best_index;
    for (std::int64_t j = 0; j < db.size(0); j += b_block) {
      const at::Tensor block = db.narrow(0, j, std::min(b_block, db.size(0) - j));
      auto [score, index] = at::mm(rows, block.t()).topk(std::min(k, block.size(0)), 1);
      index = index + j;
      if (best_score.defined()) {
        const at::Tensor all_scores = at::cat({best_score, score}, 1), all_index = at::cat({best_index, index}, 1);
        const auto top = all_scores.topk(k, 1);
        best_score = std::get<0>(top);
        best_index = all_index.gather(1, std::get<1>(top));
      } else {
        best_score = score, best_index = index;
      }
    }
    const at::Tensor keep = best_score >= candidate_cosine;
    const at::Tensor row_of = (at::arange(rows.size(0), at::kLong) + i).unsqueeze(1).expand_as(best_index);
    firsts.push_back(row_of.masked_select(keep));
    seconds.push_back(best_index.masked_select(keep));
  }
  if (firsts.empty()) return {at::zeros({0}, at::kLong), at::zeros({0}, at::kLong)};
  return {at::cat(firsts), at::cat(seconds)};
}

// The best correlation of each candidate pair over the shifts, and which shift gave it.
struct Checked {
  at::Tensor correlation, shift;  // [M] float, [M] int64 (index into the shift list)
};

Checked check_pairs(const at::Tensor& ga, const at::Tensor& gb, const at::Tensor& first, const at::Tensor& second,
                    const std::vector<std::pair<int, int>>& shifts) {
  const std::int64_t nb = gb.size(0), h = ga.size(1), w = ga.size(2);
  const std::int64_t border = shifts.size() > 1 ? 1 : 0;
  const at::Tensor mirrored = second >= nb;
  const at::Tensor b = gb.index_select(0, second.remainder(nb));
  const at::Tensor b_oriented = at::where(mirrored.view({-1, 1, 1}), b.flip(2), b);
  const at::Tensor a = normalised(ga.index_select(0, first)
                                      .narrow(1, border, h - 2 * border)
                                      .narrow(2, border, w - 2 * border)
                                      .reshape({first.size(0), -1}));
  std::vector<at::Tensor> scores;
  for (const auto& [dx, dy] : shifts) {
    const at::Tensor moved = b_oriented.narrow(1, border + dy, h - 2 * border).narrow(2, border + dx, w - 2 * border);
    scores.push_back((a * normalised(moved.reshape({first.size(0), -1}))).sum(1));
  }
  const auto best = at::stack(scores, 1).max(1);
  return {std::get<0>(best), std::get<1>(best)};
}

}  // namespace

std::string NearDuplicate::how() const {
  std::string text = mirrored ? "a mirror image" : "the same image";
  if (shift_x != 0 || shift_y != 0) {
    text += " shifted by (" + std::to_string(shift_x) + ", " + std::to_string(shift_y) + ") pixels";
  }
  char corr[32];
  std::snprintf(corr, sizeof corr, "%.4f", correlation);
  return text + ", correlation " + corr + " after normalisation";
}

std::optional<NearDuplicate> find_near_duplicate(const sdk::Dataset& a, const sdk::Dataset& b, double threshold,
                                                 std::ostream* log) {
  if (a.size() == 0 || b.size() == 0) return std::nullopt;
  const at::Tensor one = at::zeros({1}, at::kLong);
  const at::Tensor sa = a.images(one), sb = b.images(one);
  const std::int64_t h = std::min({sa.size(2), sb.size(2), max_side});
  const std::int64_t w = std::min({sa.size(3), sb.size(3), max_side});
  if (log && a.size() * b.size() > 100'000'000) {
    *log << "checking " << a.size() << " x " << b.size() << " records for near-duplicates\n" << std::flush;
  }
  const at::Tensor ga = grey_images(a, h, w), gb = grey_images(b, h, w);
  const Candidates pairs = candidate_pairs(descriptors(ga), at::cat({descriptors(gb), descriptors(gb.flip(2))}));
  std::vector<std::pair<int, int>> shifts{{0, 0}};
  if (h >= 4 && w >= 4) {
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        if (dx != 0 || dy != 0) shifts.emplace_back(dx, dy);
      }
    }
  }
  std::optional<NearDuplicate> found;
  constexpr std::int64_t batch = 4096;
  for (std::int64_t i = 0; i < pairs.first.size(0); i += batch) {
    const std::int64_t n = std::min(batch, pairs.first.size(0) - i);
    const Checked c = check_pairs(ga, gb, pairs.first.narrow(0, i, n), pairs.second.narrow(0, i, n), shifts);
    const std::int64_t best = c.correlation.argmax().item<std::int64_t>();
    const double correlation = c.correlation[best].item<double>();
    if (correlation < threshold || (found && correlation <= found->correlation)) continue;
    NearDuplicate d;
    d.first = pairs.first[i + best].item<std::int64_t>();
    const std::int64_t second = pairs.second[i + best].item<std::int64_t>();
    d.mirrored = second >= b.size();
    d.second = second % b.size();
    d.correlation = correlation;
    const auto& shift = shifts[static_cast<std::size_t>(c.shift[best].item<std::int64_t>())];
    d.shift_x = shift.first, d.shift_y = shift.second;
    found = d;
  }
  return found;
}

}  // namespace privdiff::core
