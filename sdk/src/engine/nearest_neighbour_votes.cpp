#include <privdiff/engine/nearest_neighbour_votes.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {

namespace {

void check_vote_options(const NearestNeighbourVoteOptions& o) {
  if (o.votes_per_record < 1) throw std::invalid_argument("nearest-neighbour votes: votes_per_record must be >= 1");
  if (!(o.noise_multiplier > 0) || !std::isfinite(o.noise_multiplier)) {
    throw std::invalid_argument("nearest-neighbour votes: the noise multiplier must be > 0");
  }
  if (!(o.threshold >= 0) || !std::isfinite(o.threshold)) {
    throw std::invalid_argument("nearest-neighbour votes: the threshold must be >= 0");
  }
}

// Indices [N, k] of each private row's k nearest candidate rows (float64 candidates). Distances are
// in float64 (a near tie decided by float32 rounding would make the vote depend on the order of the
// data), taken from direct differences, not the matrix-product route cdist takes beyond 25 rows:
// its rounding would make a record's distances depend on how many rows share its call. So a row's
// result is its own, and the private rows go through in chunks: only a chunk is ever in float64.
at::Tensor nearest(const at::Tensor& from, const at::Tensor& candidates, std::int64_t k) {
  constexpr std::int64_t kChunkRows = 4096;
  std::vector<at::Tensor> chosen;
  for (std::int64_t i = 0; i < from.size(0); i += kChunkRows) {
    const at::Tensor rows = from.narrow(0, i, std::min(kChunkRows, from.size(0) - i)).to(at::kDouble);
    const at::Tensor distances =
        at::cdist(rows.unsqueeze(0), candidates.unsqueeze(0), 2.0, /*donot_use_mm_for_euclid_dist=*/2).squeeze(0);
    chosen.push_back(std::get<1>(distances.topk(k, 1, /*largest=*/false)));
  }
  return at::cat(chosen);
}

}  // namespace

PrivacyEvent nearest_neighbour_vote_event(const NearestNeighbourVoteOptions& o) {
  check_vote_options(o);
  return PrivacyEvent::gaussian(o.noise_multiplier);
}

double nearest_neighbour_vote_sensitivity(std::int64_t votes_per_record) {
  if (votes_per_record < 1) throw std::invalid_argument("nearest-neighbour votes: votes_per_record must be >= 1");
  return std::sqrt(static_cast<double>(votes_per_record));
}

at::Tensor nearest_neighbour_votes(const at::Tensor& private_embeddings, const at::Tensor& synthetic_embeddings,
                                   std::int64_t votes_per_record, const at::Tensor& private_labels,
                                   const at::Tensor& synthetic_labels) {
  const at::Tensor p = private_embeddings.to(at::kCPU).flatten(1);  // to float64 chunk by chunk (nearest)
  const at::Tensor s = synthetic_embeddings.to(at::kCPU).to(at::kDouble).flatten(1);
  if (p.size(1) != s.size(1)) throw std::invalid_argument("nearest-neighbour votes: embeddings of different widths");
  if (votes_per_record < 1) throw std::invalid_argument("nearest-neighbour votes: votes_per_record must be >= 1");
  if (private_labels.defined() != synthetic_labels.defined()) {
    throw std::invalid_argument("nearest-neighbour votes: labels for both sides or for neither");
  }
  at::Tensor votes = at::zeros({s.size(0)}, at::kDouble);
  if (p.size(0) == 0) return votes;
  if (!private_labels.defined()) {
    if (votes_per_record > s.size(0)) throw std::invalid_argument("nearest-neighbour votes: more votes than synthetic images");
    const at::Tensor chosen = nearest(p, s, votes_per_record).reshape({-1});
    return votes.index_add_(0, chosen, at::ones({chosen.numel()}, at::kDouble));
  }
  const at::Tensor pl = private_labels.to(at::kCPU).to(at::kLong), sl = synthetic_labels.to(at::kCPU).to(at::kLong);
  if (pl.numel() != p.size(0) || sl.numel() != s.size(0)) {
    throw std::invalid_argument("nearest-neighbour votes: one label per embedding expected");
  }
  const at::Tensor classes = std::get<0>(at::_unique(pl));
  for (std::int64_t i = 0; i < classes.numel(); ++i) {
    const std::int64_t c = classes[i].item<std::int64_t>();
    const at::Tensor mine = (sl == c).nonzero().reshape({-1});
    if (mine.numel() < votes_per_record) {
      throw std::invalid_argument("nearest-neighbour votes: class " + std::to_string(c) + " has " +
                                  std::to_string(mine.numel()) + " synthetic image(s), fewer than votes_per_record " +
                                  std::to_string(votes_per_record));
    }
    const at::Tensor rows = (pl == c).nonzero().reshape({-1});
    const at::Tensor chosen = mine.index({nearest(p.index({rows}), s.index({mine}), votes_per_record).reshape({-1})});
    votes.index_add_(0, chosen, at::ones({chosen.numel()}, at::kDouble));
  }
  return votes;
}

VoteRelease release_votes(const at::Tensor& votes, const NearestNeighbourVoteOptions& o, GaussianNoise& noise) {
  check_vote_options(o);
  const at::Tensor v = votes.to(at::kCPU).to(at::kDouble);
  const at::Tensor noisy = v + noise.sample(v, o.noise_multiplier * nearest_neighbour_vote_sensitivity(o.votes_per_record));
  return {noisy, (noisy - o.threshold).clamp_min(0)};
}

at::Tensor resample_by_votes(const at::Tensor& weights, std::int64_t count, std::uint64_t generator_seed) {
  if (count < 0) throw std::invalid_argument("nearest-neighbour votes: a negative number of draws");
  const at::Tensor w = weights.to(at::kCPU).to(at::kDouble);
  if (w.numel() > 0 && w.min().item<double>() < 0) throw std::invalid_argument("nearest-neighbour votes: negative weights");
  if (count == 0) return at::empty({0}, at::kLong);
  if (w.numel() == 0 || w.sum().item<double>() <= 0) {
    throw std::invalid_argument("nearest-neighbour votes: every count is zero after the threshold (lower the threshold, "
                                "or spend more privacy for a smaller noise multiplier)");
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
  return at::multinomial(w, count, /*replacement=*/true, generator);
}

}  // namespace privdiff::sdk::engine
