// PrivImage's semantic query: the histogram against a naive per-image loop, its sensitivity under
// adding or removing any one record (exactly sqrt(top_k), never more), the noise's scale, the
// privacy event, the selection and the public records it releases.
#include <privdiff/engine/semantic_query.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace privdiff::sdk;
using namespace privdiff::sdk::engine;

namespace {

// The query written the plain way: per image, sort the public classes by logit and add one to the
// first top_k in the image's class row (random logits: no ties).
at::Tensor naive_histogram(const at::Tensor& logits, const at::Tensor& labels, std::int64_t classes, std::int64_t k) {
  const std::int64_t columns = logits.size(1);
  at::Tensor h = at::zeros({classes, columns}, at::kDouble);
  auto out = h.accessor<double, 2>();
  const at::Tensor l = logits.to(at::kDouble).contiguous();
  for (std::int64_t i = 0; i < logits.size(0); ++i) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(columns));
    std::iota(order.begin(), order.end(), 0);
    const at::Tensor logits_row = l[i];
    auto row = logits_row.accessor<double, 1>();
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
    const std::int64_t c = labels[i].item<std::int64_t>();
    for (std::int64_t r = 0; r < k; ++r) out[c][order[static_cast<std::size_t>(r)]] += 1;
  }
  return h;
}

}  // namespace

TEST(SemanticQuery, HistogramMatchesANaiveLoop) {
  at::manual_seed(3);
  const at::Tensor logits = at::randn({300, 12}, at::kDouble);
  const at::Tensor labels = at::randint(0, 5, {300}, at::kLong);
  for (std::int64_t k : {1, 3, 12}) {
    const at::Tensor got = semantic_histogram(logits, labels, 5, k);
    EXPECT_TRUE(at::equal(got, naive_histogram(logits, labels, 5, k))) << "top_k " << k;
    EXPECT_EQ(got.sum().item<double>(), 300.0 * static_cast<double>(k));
  }
}

TEST(SemanticQuery, OneRecordMovesTheHistogramByExactlySqrtTopK) {
  // Add/remove replay: D and D plus one record x, for records of every kind (extreme logits, all
  // logits tied, each class); the L2 change of the released statistic is the stated sensitivity.
  at::manual_seed(5);
  const at::Tensor logits = at::randn({200, 10}, at::kDouble);
  const at::Tensor labels = at::randint(0, 4, {200}, at::kLong);
  const std::vector<at::Tensor> records{at::randn({1, 10}, at::kDouble) * 1e6, at::zeros({1, 10}, at::kDouble),
                                        at::full({1, 10}, -1e300, at::kDouble), at::randn({1, 10}, at::kDouble)};
  for (std::int64_t k : {1, 2, 5}) {
    const at::Tensor base = semantic_histogram(logits, labels, 4, k);
    for (std::size_t r = 0; r < records.size(); ++r) {
      for (std::int64_t c = 0; c < 4; ++c) {
        const at::Tensor with = semantic_histogram(at::cat({logits, records[r]}), at::cat({labels, at::full({1}, c, at::kLong)}), 4, k);
        const double moved = (with - base).norm().item<double>();
        EXPECT_DOUBLE_EQ(moved, semantic_query_sensitivity(k)) << "top_k " << k << ", record " << r << ", class " << c;
        // Only the record's own class row changes.
        for (std::int64_t other = 0; other < 4; ++other) {
          if (other != c) EXPECT_TRUE(at::equal(with[other], base[other]));
        }
      }
    }
  }
}

TEST(SemanticQuery, NoiseStdIsSigmaSqrtTopKAndTheEventIsOneGaussian) {
  SemanticQueryOptions o;
  o.top_k = 4;
  o.noise_multiplier = 7.0;
  o.select = 3;
  auto noise = GaussianNoise::seeded(11);
  const at::Tensor h = at::zeros({100, 400}, at::kDouble);
  const auto release = release_semantic_selection(h, o, noise);
  const double sample_std = release.noisy_histogram.std().item<double>();
  // 40,000 draws: the sample std is within 1.5 % of sigma sqrt(k) = 14 with overwhelming probability.
  EXPECT_NEAR(sample_std / 14.0, 1.0, 0.015);
  EXPECT_EQ(semantic_query_event(o), PrivacyEvent::gaussian(7.0));
  // Each row's selection is the noisy row's `select` largest, largest first.
  for (std::int64_t c = 0; c < 100; c += 17) {
    const at::Tensor want = std::get<1>(release.noisy_histogram[c].topk(3));
    EXPECT_TRUE(at::equal(release.selected[c], want));
  }
}

TEST(SemanticQuery, ReleasedRecordsComeFromTheSelectedPublicClassesOnly) {
  const at::Tensor public_labels = at::arange(60, at::kLong).remainder(6);  // 10 records per public class
  const at::Tensor selected = at::tensor({0, 3, 5, 4}, at::kLong).reshape({2, 2});
  const auto [indices, labels] = selected_public_records(public_labels, selected, 25, 7);
  ASSERT_EQ(indices.numel(), 50);
  for (std::int64_t i = 0; i < 50; ++i) {
    const std::int64_t c = labels[i].item<std::int64_t>();
    EXPECT_EQ(c, i / 25);
    const std::int64_t p = public_labels[indices[i].item<std::int64_t>()].item<std::int64_t>();
    EXPECT_TRUE(p == selected[c][0].item<std::int64_t>() || p == selected[c][1].item<std::int64_t>()) << i;
  }
  // The first 20 of a class are its 20 pool records once each (a permutation), then it repeats.
  at::Tensor first = std::get<0>(indices.slice(0, 0, 20).sort());
  EXPECT_EQ(std::get<0>(at::_unique(first)).numel(), 20);
  const auto again = selected_public_records(public_labels, selected, 25, 7);
  EXPECT_TRUE(at::equal(again.first, indices));
  EXPECT_THROW(selected_public_records(public_labels, at::tensor({7, 8}, at::kLong).reshape({1, 2}), 5, 1),
               std::invalid_argument);
}

TEST(SemanticQuery, RefusesOptionsAndInputsOutsideItsDomain) {
  SemanticQueryOptions o;
  o.top_k = 0;
  EXPECT_THROW(semantic_query_event(o), std::invalid_argument);
  o.top_k = 2;
  o.noise_multiplier = 0;
  EXPECT_THROW(semantic_query_event(o), std::invalid_argument);
  const at::Tensor logits = at::randn({4, 3});
  EXPECT_THROW(semantic_histogram(logits, at::tensor({0, 1, 2, 9}, at::kLong), 3, 1), std::invalid_argument);
  EXPECT_THROW(semantic_histogram(logits, at::zeros({4}, at::kLong), 3, 4), std::invalid_argument);
}
