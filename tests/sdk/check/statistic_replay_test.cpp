// check/statistic_replay.hpp against a stand-in query with known sensitivity: per class and pixel, the
// count of records whose pixel is positive (8x8 images: sensitivity sqrt(64) = 8), released with
// Gaussian noise. The correct query passes with x = "every pixel +10" exactly 8 away; planted bugs are each reported: a record counted twice under a declared
// sensitivity of 1, half the declared noise, a ledger that is not the plan, a statistic not reported,
// and a released shape that depends on x.
#include <privdiff/check/statistic_replay.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/engine/gaussian_noise.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

using namespace privdiff;
using namespace privdiff::sdk::check;

namespace {

struct Bugs {
  double weight = 1;        // how much each record counts in a pixel (declared: 1, L2 sensitivity 8)
  double noise_scale = 1;   // the noise actually added, over the declared
  bool record_twice = false;
  bool report = true;
  bool shape_follows_data = false;
};

class CountingQuery : public sdk::Mechanism {
 public:
  CountingQuery(std::uint64_t noise_seed, Bugs bugs) : seed_(noise_seed), bugs_(bugs) {}
  bool is_private() const override { return true; }
  sdk::PrivacyEvent planned_events(std::int64_t) const override { return sdk::PrivacyEvent::gaussian(sigma_); }
  std::optional<double> noise_multiplier() const override { return sigma_; }
  void run(sdk::StageContext& context) override {
    const at::Tensor all = at::arange(context.data.size(), at::kLong);
    const at::Tensor positive = context.data.images(all).flatten(1).gt(0).to(at::kDouble) * bugs_.weight;
    const at::Tensor counts =
        at::zeros({context.num_classes, positive.size(1)}, at::kDouble).index_add_(0, context.data.labels(all), positive);
    auto noise = sdk::engine::GaussianNoise::seeded(seed_);
    const at::Tensor released = counts + noise.sample(counts, 8.0 * sigma_ * bugs_.noise_scale);
    context.ledger.record(sdk::PrivacyEvent::gaussian(sigma_));
    if (bugs_.record_twice) context.ledger.record(sdk::PrivacyEvent::gaussian(sigma_));
    if (bugs_.report) context.released_statistic({"counts", released, 8.0, 8.0 * sigma_, false});
    const std::int64_t n = bugs_.shape_follows_data ? context.data.size() : 4;
    context.release(at::zeros({n, 1, 2, 2}), at::zeros({n}, at::kLong));
  }

 private:
  double sigma_ = 2.0;
  std::uint64_t seed_;
  Bugs bugs_;
};

struct Fixture {
  ReplayData d = ReplayData::in_classes(random_images(23, 3, {1, 8, 8}), 3);
  std::vector<Neighbour> xs = adversarial_neighbours(10.0, 2, {1, 8, 8});
  ReplayModel model{at::kDouble, 0};

  Report check(const Bugs& bugs) {
    auto stage = statistic_stage([bugs](std::uint64_t seed) { return std::make_unique<CountingQuery>(seed, bugs); },
                                 model, nullptr, 3, 5);
    StatisticReplayOptions options;
    options.false_alarm = 1e-3;
    return check_statistic_releases(stage, d, xs, options);
  }
};

bool mentions(const Report& r, const std::string& text) {
  for (const auto& v : r.violations) {
    if (v.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST(StatisticReplay, ACorrectQueryPassesWithXOneCountAway) {
  Fixture f;
  const Report r = f.check({});
  std::cout << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  double worst = 0;
  for (const auto& m : r.measurements) {
    if (m.name.rfind("x = ", 0) == 0) worst = std::max(worst, m.distance / m.bound);
  }
  EXPECT_NEAR(worst, 1.0, 1e-9);  // "every pixel +10": one count in each of the 64 pixels of its class
}

TEST(StatisticReplay, PlantedBugsAreReported) {
  Fixture f;
  Bugs doubled;
  doubled.weight = 2;
  EXPECT_TRUE(mentions(f.check(doubled), "more than the declared sensitivity")) << f.check(doubled).describe();
  Bugs quiet;
  quiet.noise_scale = 0.5;
  EXPECT_TRUE(mentions(f.check(quiet), "noise of counts")) << f.check(quiet).describe();
  Bugs unplanned;
  unplanned.record_twice = true;
  EXPECT_TRUE(mentions(f.check(unplanned), "is not the plan"));
  Bugs silent;
  silent.report = false;
  EXPECT_TRUE(mentions(f.check(silent), "reported no released statistic"));
  Bugs leaky;
  leaky.shape_follows_data = true;
  EXPECT_TRUE(mentions(f.check(leaky), "structure"));
}
