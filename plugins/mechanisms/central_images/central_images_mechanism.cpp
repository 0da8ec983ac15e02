// central_images: DP-FETA's first stage (Li et al., S&P 2025). Releases `queries` noisy central
// images per class (mean or mode of a Poisson subsample, engine/central_images.hpp) instead of
// training; the host saves them as a dataset named after the stage, for a non-private warm-up.
// The classes are the model's (public), so what is released never depends on the private labels.
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/engine/central_images.hpp>
#include <privdiff/engine/release_noise.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace privdiff::plugins::central_images {

using namespace privdiff::sdk;

class CentralImages : public Mechanism {
 public:
  explicit CentralImages(const Config& c) {
    o_.statistic = engine::central_statistic_from_string(c.get_string("statistic"));
    o_.queries = c.get_int("queries");
    o_.sampling_rate = c.get_double("sampling_rate");
    o_.noise_multiplier = c.get_double("noise_multiplier");
    o_.resolution = c.get_int("resolution");
    o_.bins = c.get_int("bins");
    o_.post_process = c.get_bool("post_process");
    o_.class_sizes = engine::class_sizes_from_string(c.get_string("class_sizes"));
    noise_ = engine::ReleaseNoise::from(c);
    engine::central_images_event(o_);  // checks the options
  }

  bool is_private() const override { return true; }
  PrivacyEvent planned_events(std::int64_t) const override { return engine::central_images_event(o_); }
  // sigma_c is fixed (never "auto"): the host's size checks ask with any sigma, the answer is the plan.
  PrivacyEvent planned_events_with(double, std::int64_t n) const override { return planned_events(n); }
  std::optional<double> noise_multiplier() const override { return o_.noise_multiplier; }
  std::int64_t released_examples(std::int64_t, std::int64_t classes) const override { return o_.queries * classes; }

  void run(StageContext& context) override {
    if (!context.release) throw std::logic_error("central_images: the host gave the stage nowhere to release to");
    if (context.resume) {
      throw std::runtime_error("central_images cannot resume mid-stage: its queries are spent; start a new run");
    }
    const Dataset& data = context.data;
    const at::Tensor all = at::arange(data.size(), at::kLong);
    auto stream = [&](engine::StreamPurpose purpose) { return noise_.stream(context, purpose); };
    if (o_.statistic == engine::CentralStatistic::mean && o_.class_sizes == engine::ClassSizes::private_counts) {
      context.ledger.add_caveat(engine::private_class_sizes_caveat());
    }
    engine::PoissonSampler sampler(data.size(), o_.sampling_rate, stream(engine::StreamPurpose::sampling));
    engine::GaussianNoise noise(stream(engine::StreamPurpose::noise));
    const at::Tensor images = data.images(all);
    const auto release = engine::release_central_images(images, data.labels(all), context.num_classes, o_, sampler, noise);
    // Nothing leaves the stage before the release below: its queries are spent from here on.
    for (std::int64_t q = 0; q < o_.queries; ++q) context.ledger.record(engine::central_query_event(o_));
    if (context.released_statistic) report_statistics(context, release, images.size(1));
    context.release(release.images, release.labels);
    StepReport report;  // the release is the stage's one step
    report.step = report.total_steps = 1;
    if (context.step_done) context.step_done(report, [](torch::serialize::OutputArchive&) {});
  }

 private:
  // For the checks (privdiff check-mechanism): each query's noisy statistic, before division or
  // argmax. With q_c < 1 a later query's subsample comes from a stream that one more record has moved
  // on by one draw, so only the first query's values compare record for record ("adaptive" for the
  // others); with q_c = 1 every query holds every record and all compare.
  void report_statistics(StageContext& context, const engine::CentralImages& release, std::int64_t channels) const {
    const double sensitivity = engine::central_mean_sensitivity(channels, o_.resolution);  // the mode's too
    const std::string what = o_.statistic == engine::CentralStatistic::mean ? "noisy class sums" : "noisy pixel histograms";
    for (std::size_t q = 0; q < release.statistics.size(); ++q) {
      context.released_statistic({what + ", query " + std::to_string(q + 1), release.statistics[q], sensitivity,
                                  o_.noise_multiplier * sensitivity, q > 0 && o_.sampling_rate < 1});
    }
  }

  engine::CentralImageOptions o_;
  engine::ReleaseNoise noise_;
};

namespace {
Schema schema() {
  Schema schema;
  schema
      .add(Key::string("statistic").one_of({"mean", "mode"}).defaults("mean")
               .doc("mean: noisy class sums over the expected class count; mode: noisy per-pixel histograms"))
      .add(Key::integer("queries").at_least(1).at_most(10000).defaults(5).doc("Poisson subsamples; each releases one image per class"))
      .add(Key::number("sampling_rate").greater_than(0).at_most(1).defaults(0.1).doc("q_c of each query"))
      .add(Key::number("noise_multiplier").greater_than(0).defaults(5.0).doc("sigma_c: noise std / sensitivity"))
      .add(Key::integer("resolution").at_least(1).defaults(14).doc("images are downsampled to this size first"))
      .add(Key::integer("bins").at_least(2).defaults(16).doc("mode: histogram bins over the pixel range"))
      .add(Key::string("class_sizes").one_of({"uniform", "private"}).defaults("uniform")
               .doc("mean: the divisor q_c N_class takes N_class = N / classes (uniform: public) or each class's "
                    "count in the private data (private: outside the guarantee, the run carries a caveat)"))
      .add(Key::boolean("post_process").defaults(true)
               .doc("3x3 median blur, then sharpening for grey images (the authors' filters; no privacy cost)"));
  engine::add_release_noise_keys(schema, "noise and subsamples");
  return schema;
}

void register_components(Registrar* registrar) {
  registrar->add<CentralImages>("central_images",
                                "DP-FETA central images: releases noisy per-class mean or mode images for a warm-up",
                                schema());
}
}  // namespace

}  // namespace privdiff::plugins::central_images

PRIVDIFF_PLUGIN("central_images", "0.1.0", "DP-FETA's central images", privdiff::plugins::central_images::register_components)
