#pragma once
/// @file
/// Private Evolution's DP nearest-neighbour histogram (Lin et al., ICLR 2024, Algorithm 2,
/// DP_NN_HISTOGRAM): how many private images have each synthetic image among their nearest, in a
/// public embedding, released with the Gaussian mechanism. PE repeats it once per iteration, so each
/// release is one ledger event.
///
/// Each private image votes for its `votes_per_record` nearest synthetic images (distinct; L2 distance
/// between embeddings), of its own class when labels are given. Adding or removing one record changes
/// that many entries by one: L2 sensitivity sqrt(votes_per_record). The release is the votes plus
/// N(0, (sigma sqrt(votes_per_record))^2) per entry, then max(h - threshold, 0) (post-processing, as
/// the paper's H). The next generation is drawn from the synthetic images with probability
/// proportional to the thresholded histogram, with replacement (post-processing too).
/// Embeddings come from a public network and the synthetic images from public data and earlier
/// releases only: nothing but the votes reads the private data.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace privdiff::sdk::engine {

struct NearestNeighbourVoteOptions {
  std::int64_t votes_per_record = 1;  ///< nearest synthetic images each private image votes for
  double noise_multiplier = 10.0;     ///< sigma: noise std / sensitivity sqrt(votes_per_record)
  double threshold = 0.0;             ///< H: subtracted from every noisy count, clamped at 0
};

/// The privacy one release spends: one Gaussian with the options' noise multiplier, on all records.
PRIVDIFF_SDK_API PrivacyEvent nearest_neighbour_vote_event(const NearestNeighbourVoteOptions& options);

/// The votes' L2 sensitivity under adding or removing one record: sqrt(votes_per_record).
PRIVDIFF_SDK_API double nearest_neighbour_vote_sensitivity(std::int64_t votes_per_record);

/// Votes [M] (double) of the private embeddings [N, D] for the synthetic embeddings [M, D]: each
/// private row adds one to its votes_per_record nearest synthetic rows. With labels (int64 [N] and
/// [M], both defined), a private row votes among the synthetic rows of its label only; a label with
/// fewer synthetic rows than votes_per_record is refused.
PRIVDIFF_SDK_API at::Tensor nearest_neighbour_votes(const at::Tensor& private_embeddings,
                                                    const at::Tensor& synthetic_embeddings,
                                                    std::int64_t votes_per_record,
                                                    const at::Tensor& private_labels = {},
                                                    const at::Tensor& synthetic_labels = {});

struct VoteRelease {
  at::Tensor noisy;        ///< [M]: votes plus the Gaussian noise (the release)
  at::Tensor thresholded;  ///< [M]: max(noisy - threshold, 0)
};

/// The release of one iteration's votes.
PRIVDIFF_SDK_API VoteRelease release_votes(const at::Tensor& votes, const NearestNeighbourVoteOptions& options,
                                           GaussianNoise& noise);

/// `count` indices into the synthetic images, drawn with replacement with probability proportional to
/// `weights` [M] (the thresholded release; non-negative), ordered by `generator_seed` (per class: call
/// it with one class's weights). Throws std::invalid_argument when the weights are all zero (the
/// threshold removed every vote: lower it, or spend more privacy for a smaller noise multiplier).
PRIVDIFF_SDK_API at::Tensor resample_by_votes(const at::Tensor& weights, std::int64_t count,
                                              std::uint64_t generator_seed);

}  // namespace privdiff::sdk::engine
