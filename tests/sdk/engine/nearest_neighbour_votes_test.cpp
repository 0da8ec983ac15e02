// Private Evolution's DP nearest-neighbour histogram: the votes against a naive per-image loop and
// across the chunks the private rows go through in, their sensitivity under adding or removing any
// one record (exactly sqrt(votes_per_record) in L2, never more, with and without classes), the
// noise's scale and the privacy event, the threshold, and the resampling, which never draws an image
// whose count the threshold removed.
#include <privdiff/engine/nearest_neighbour_votes.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace privdiff::sdk;
using namespace privdiff::sdk::engine;

namespace {

// Per private image: distances to every allowed synthetic image, sorted, one vote to each of the first k.
at::Tensor naive_votes(const at::Tensor& p, const at::Tensor& s, std::int64_t k, const at::Tensor& pl = {},
                       const at::Tensor& sl = {}) {
  std::vector<double> votes(static_cast<std::size_t>(s.size(0)), 0.0);
  for (std::int64_t i = 0; i < p.size(0); ++i) {
    std::vector<std::pair<double, std::int64_t>> by_distance;
    for (std::int64_t j = 0; j < s.size(0); ++j) {
      if (pl.defined() && pl[i].item<std::int64_t>() != sl[j].item<std::int64_t>()) continue;
      by_distance.emplace_back((p[i] - s[j]).pow(2).sum().item<double>(), j);
    }
    std::sort(by_distance.begin(), by_distance.end());
    for (std::int64_t r = 0; r < k; ++r) votes[static_cast<std::size_t>(by_distance[static_cast<std::size_t>(r)].second)] += 1;
  }
  return at::tensor(votes, at::kDouble);
}

}  // namespace

TEST(NearestNeighbourVotes, VotesMatchANaiveLoop) {
  at::manual_seed(1);
  const at::Tensor p = at::randn({40, 6}), s = at::randn({15, 6});
  for (std::int64_t k : {1, 3}) {
    EXPECT_TRUE(at::equal(nearest_neighbour_votes(p, s, k), naive_votes(p, s, k))) << "k " << k;
    EXPECT_EQ(nearest_neighbour_votes(p, s, k).sum().item<double>(), 40.0 * static_cast<double>(k));
  }
  const at::Tensor pl = at::randint(0, 3, {40}, at::kLong), sl = at::arange(15, at::kLong) % 3;
  EXPECT_TRUE(at::equal(nearest_neighbour_votes(p, s, 2, pl, sl), naive_votes(p, s, 2, pl, sl)));
}

// The private rows go through in chunks of 4,096: 9,000 rows cross two boundaries, and each of the
// two classes' ~4,500 rows one. A record's votes are its own, so any split of the records must add
// up to the whole's, with and without classes.
TEST(NearestNeighbourVotes, ChunksOfThePrivateRowsAddUpToTheWhole) {
  at::manual_seed(2);
  const at::Tensor p = at::randn({9000, 4}), s = at::randn({30, 4});
  const at::Tensor pl = at::randint(0, 2, {9000}, at::kLong), sl = at::arange(30, at::kLong) % 2;
  ASSERT_GT(at::bincount(pl).min().item<std::int64_t>(), 4096);
  const auto part = [&](std::int64_t from, std::int64_t to, bool classes) {
    const at::Tensor rows = p.slice(0, from, to);
    return classes ? nearest_neighbour_votes(rows, s, 2, pl.slice(0, from, to), sl) : nearest_neighbour_votes(rows, s, 2);
  };
  for (bool classes : {false, true}) {
    const at::Tensor whole = part(0, 9000, classes);
    EXPECT_TRUE(at::equal(whole, part(0, 3000, classes) + part(3000, 6001, classes) + part(6001, 9000, classes)))
        << "classes " << classes;
    EXPECT_EQ(whole.sum().item<double>(), 18000.0);
  }
}

TEST(NearestNeighbourVotes, OneRecordMovesTheVotesByExactlySqrtK) {
  at::manual_seed(2);
  const at::Tensor p = at::randn({30, 4}), s = at::randn({12, 4});
  const at::Tensor pl = at::randint(0, 2, {30}, at::kLong), sl = at::arange(12, at::kLong) % 2;
  for (std::int64_t k : {1, 2, 4}) {
    for (bool classes : {false, true}) {
      const at::Tensor all = classes ? nearest_neighbour_votes(p, s, k, pl, sl) : nearest_neighbour_votes(p, s, k);
      for (std::int64_t removed = 0; removed < 30; ++removed) {  // every neighbouring dataset
        const at::Tensor keep = at::cat({at::arange(removed, at::kLong), at::arange(removed + 1, 30, at::kLong)});
        const at::Tensor without = classes ? nearest_neighbour_votes(p.index({keep}), s, k, pl.index({keep}), sl)
                                           : nearest_neighbour_votes(p.index({keep}), s, k);
        const at::Tensor change = all - without;
        EXPECT_NEAR(change.norm().item<double>(), nearest_neighbour_vote_sensitivity(k), 1e-12);
        EXPECT_EQ(change.max().item<double>(), 1.0);  // k entries moved by one: no entry by more
        EXPECT_EQ(change.min().item<double>(), 0.0);
      }
    }
  }
}

TEST(NearestNeighbourVotes, NoiseStdIsSigmaSqrtKAndThresholdIsPostProcessing) {
  const NearestNeighbourVoteOptions options{4, 3.0, 2.5};
  const at::Tensor votes = at::zeros({200000}, at::kDouble);
  auto noise = GaussianNoise::seeded(9);
  const VoteRelease r = release_votes(votes, options, noise);
  EXPECT_NEAR(r.noisy.std().item<double>(), 3.0 * 2.0, 0.05);
  EXPECT_TRUE(at::equal(r.thresholded, (r.noisy - 2.5).clamp_min(0)));
  // The same seed gives the same noise: the release is votes + GaussianNoise(sigma sqrt(k)), nothing else.
  auto again = GaussianNoise::seeded(9);
  EXPECT_TRUE(at::equal(r.noisy, votes + again.sample(votes, 6.0)));
  const auto event = nearest_neighbour_vote_event(options);
  EXPECT_EQ(event, PrivacyEvent::gaussian(3.0));
}

TEST(NearestNeighbourVotes, ResamplingDrawsOnlyWhatTheThresholdKept) {
  const at::Tensor weights = at::tensor({0.0, 3.0, 0.0, 1.0}, at::kDouble);
  const at::Tensor drawn = resample_by_votes(weights, 4000, 5);
  EXPECT_EQ(drawn.numel(), 4000);
  EXPECT_EQ((drawn == 0).sum().item<std::int64_t>() + (drawn == 2).sum().item<std::int64_t>(), 0);
  EXPECT_NEAR((drawn == 1).to(at::kDouble).mean().item<double>(), 0.75, 0.03);
  EXPECT_TRUE(at::equal(drawn, resample_by_votes(weights, 4000, 5)));  // seeded
}

TEST(NearestNeighbourVotes, RefusesOptionsAndInputsOutsideItsDomain) {
  auto noise = GaussianNoise::seeded(1);
  const at::Tensor v = at::zeros({3}, at::kDouble);
  EXPECT_THROW(release_votes(v, {0, 1.0, 0.0}, noise), std::invalid_argument);
  EXPECT_THROW(release_votes(v, {1, 0.0, 0.0}, noise), std::invalid_argument);
  EXPECT_THROW(release_votes(v, {1, 1.0, -1.0}, noise), std::invalid_argument);
  EXPECT_THROW(nearest_neighbour_votes(at::randn({2, 3}), at::randn({2, 4}), 1), std::invalid_argument);
  EXPECT_THROW(nearest_neighbour_votes(at::randn({2, 3}), at::randn({2, 3}), 3), std::invalid_argument);
  EXPECT_THROW(nearest_neighbour_votes(at::randn({2, 3}), at::randn({2, 3}), 1, at::zeros({2}, at::kLong)),
               std::invalid_argument);
  EXPECT_THROW(nearest_neighbour_votes(at::randn({2, 3}), at::randn({2, 3}), 2, at::zeros({2}, at::kLong),
                                       at::tensor({0, 1}, at::kLong)),
               std::invalid_argument);  // class 0 has one synthetic image, fewer than two votes
  EXPECT_THROW(resample_by_votes(at::zeros({3}, at::kDouble), 2, 1), std::invalid_argument);
  EXPECT_THROW(resample_by_votes(at::tensor({1.0, -1.0}, at::kDouble), 2, 1), std::invalid_argument);
}
