// private_evolution: Private Evolution (Lin et al., ICLR 2024), a private synthetic set without any
// private training. The stage's model, trained on public data only, draws samples; each iteration
// every private image votes for its nearest synthetic image in an embedding (the output space of a
// classifier trained on public data, or the pixels themselves; engine/nearest_neighbour_votes.hpp),
// the vote histogram is released with the Gaussian mechanism and thresholded, the next generation is
// drawn in proportion to it and varied SDEdit-style (partly noised, then denoised by the same model).
// Each iteration's histogram is one ledger event; the last generation is released as a dataset named
// after the stage.
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/sampling.hpp>
#include <privdiff/engine/nearest_neighbour_votes.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/engine/release_noise.hpp>
#include <privdiff/evaluation/public_classifier.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::plugins::private_evolution {

using namespace privdiff::sdk;

class PrivateEvolution : public Mechanism {
 public:
  explicit PrivateEvolution(const Config& c) : path_(c.path()), public_data_(c.get_string("public_data")) {
    iterations_ = c.get_int("iterations");
    samples_per_class_ = c.get_int("samples_per_class");
    o_.votes_per_record = c.get_int("votes_per_record");
    o_.threshold = c.get_double("threshold");
    if (!c.is_keyword("noise_multiplier", "auto")) {
      o_.noise_multiplier = c.get_double("noise_multiplier");
      calibrated_ = true;
    }
    variation_sigma_ = c.get_double("variation_sigma");
    pixel_embedding_ = c.get_string("embedding") == "pixels";
    sampler_.steps = c.get_int("sampler_steps");
    classifier_ = evaluation::public_classifier_options(c);
    noise_ = engine::ReleaseNoise::from(c);
    if (o_.votes_per_record >= samples_per_class_) {
      throw KeyValueError(c.path() + ".votes_per_record", "must be below samples_per_class (" +
                                  std::to_string(samples_per_class_) + "), got " + std::to_string(o_.votes_per_record) +
                                  ": with a vote for every sample of its class, the histogram says nothing");
    }
  }

  bool is_private() const override { return true; }
  bool needs_calibration() const override { return !calibrated_; }
  // One Gaussian release of the whole data's votes per iteration (q = 1), composed T times.
  PrivacyEvent planned_events_with(double sigma, std::int64_t) const override {
    engine::NearestNeighbourVoteOptions o = o_;
    o.noise_multiplier = sigma;
    return PrivacyEvent::self_composed(engine::nearest_neighbour_vote_event(o), iterations_);
  }
  PrivacyEvent planned_events(std::int64_t n) const override {
    if (!calibrated_) throw std::logic_error("private_evolution: noise_multiplier is \"auto\" and has not been calibrated");
    return planned_events_with(o_.noise_multiplier, n);
  }
  void set_noise_multiplier(double sigma) override {
    o_.noise_multiplier = sigma;
    calibrated_ = true;
  }
  std::optional<double> noise_multiplier() const override {
    return calibrated_ ? std::optional<double>(o_.noise_multiplier) : std::nullopt;
  }
  std::optional<std::string> public_data_name() const override { return public_data_; }
  std::int64_t released_examples(std::int64_t, std::int64_t classes) const override {
    return samples_per_class_ * std::max<std::int64_t>(classes, 1);
  }
  // Nothing trains: the model is the public generator.
  void check_public_data(const Dataset& pub) const override {
    // A classifier trained on one class embeds every image alike: every vote would say nothing.
    if (pixel_embedding_) return;
    const at::Tensor counts = at::bincount(pub.labels(at::arange(pub.size(), at::kLong)), {}, pub.num_classes());
    const std::int64_t held = counts.gt(0).sum().item<std::int64_t>();
    if (held < 2) {
      throw KeyValueError(path_ + ".embedding", "\"classifier\" trains a classifier on the public data, which needs "
                          "records of at least 2 classes (" + pub.name() + " has records of " + std::to_string(held) +
                          "; or set embedding = \"pixels\")");
    }
  }

  void select_trainable(Model& model) const override {
    for (auto& p : model.module().parameters()) p.set_requires_grad(false);
  }

  void run(StageContext& context) override {
    if (!context.release || !context.public_data) {
      throw std::logic_error("private_evolution: the host gave the stage no public data or nowhere to release to");
    }
    if (context.resume) throw std::runtime_error("private_evolution cannot resume mid-stage: its votes are spent");
    const Dataset& pub = *context.public_data;
    std::optional<evaluation::PublicClassifier> classifier;
    if (!pixel_embedding_) {
      classifier.emplace(pub, pub.labels(at::arange(pub.size(), at::kLong)), classifier_, context.seed, std::cout,
                         "private_evolution");
    }
    const auto embed = [&](const at::Tensor& images) {
      return classifier ? classifier->logits(images) : images.flatten(1);
    };
    const at::Tensor all = at::arange(context.data.size(), at::kLong);
    const at::Tensor private_embeddings = embed(context.data.images(all));
    const at::Tensor private_labels = context.num_classes > 0 ? context.data.labels(all) : at::Tensor();
    const at::Tensor labels = synthetic_labels(context.num_classes);
    const auto stage = static_cast<std::uint64_t>(context.stage_index);
    engine::GaussianNoise noise(noise_.stream(context, engine::StreamPurpose::noise));
    // The generator's draws are public randomness (they never see a record): seeded from the run.
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(context.seed + 7919 * stage);
    context.model.module().eval();
    at::Tensor samples = generate(context.model, at::randn(sample_shape(context.model, labels.size(0)), generator),
                                  labels, sampler_.sigma_max, generator);
    std::vector<std::string> log;  // printed once the ledger is written
    for (std::int64_t t = 1; t <= iterations_; ++t) {
      // Progress without a count (the counts are printed after the release): public as the recipe is.
      std::cout << "private_evolution: iteration " << t << "/" << iterations_ << ": voting and generating\n" << std::flush;
      const at::Tensor synthetic = embed(images_of(context.model, samples));
      const at::Tensor votes = engine::nearest_neighbour_votes(private_embeddings, synthetic, o_.votes_per_record,
                                                               private_labels, private_labels.defined() ? labels : at::Tensor());
      const engine::VoteRelease release = engine::release_votes(votes, o_, noise);
      context.ledger.record(engine::nearest_neighbour_vote_event(o_));
      if (context.released_statistic) {
        const double sensitivity = engine::nearest_neighbour_vote_sensitivity(o_.votes_per_record);
        context.released_statistic({"votes, iteration " + std::to_string(t), release.noisy, sensitivity,
                                    o_.noise_multiplier * sensitivity, t > 1});
      }
      const at::Tensor chosen = resample(release.thresholded, labels, context.num_classes, context.seed + t, log);
      log.push_back("private_evolution: iteration " + std::to_string(t) + "/" + std::to_string(iterations_) + ": " +
                    std::to_string((release.thresholded > 0).sum().item<std::int64_t>()) + " of " +
                    std::to_string(labels.size(0)) + " synthetic images kept by the thresholded votes");
      const at::Tensor parents = samples.index({chosen.to(samples.device())});
      samples = generate(context.model, parents / variation_sigma_ + at::randn(parents.sizes(), generator).to(parents.device()),
                         labels, variation_sigma_, generator);
    }
    // Nothing derived from a release leaves the stage (not even the log) before the host's release has
    // written the ledger; one step report at the end, so that no checkpoint falls mid-stage.
    context.release(images_of(context.model, samples).to(at::kCPU).clamp(-1, 1), labels);
    for (const auto& line : log) std::cout << line << "\n";
    StepReport report;
    report.step = report.total_steps = iterations_;
    if (context.step_done) context.step_done(report, [](torch::serialize::OutputArchive&) {});
  }

 private:
  // samples_per_class of each class, in class order (one unlabelled set without classes).
  at::Tensor synthetic_labels(std::int64_t classes) const {
    if (classes == 0) return at::full({samples_per_class_}, -1, at::kLong);
    return at::arange(classes, at::kLong).repeat_interleave(samples_per_class_);
  }

  static std::vector<std::int64_t> sample_shape(Model& model, std::int64_t count) {
    std::vector<std::int64_t> shape{count};
    for (const auto d : model.sample_shape()) shape.push_back(d);
    return shape;
  }

  static at::Tensor images_of(Model& model, const at::Tensor& samples) {
    torch::NoGradGuard no_grad;
    return model.decode(samples).to(at::kCPU).to(at::kFloat).clamp(-1, 1);
  }

  // The model's samples from unit-variance `noise` scaled to sigma_max: from pure noise (sigma_max
  // the sampler's) or, for a variation, from noised parents (SDEdit).
  at::Tensor generate(Model& model, const at::Tensor& noise, const at::Tensor& labels, double sigma_max,
                      at::Generator& generator) const {
    diffusion::EdmSamplerOptions o = sampler_;
    o.sigma_max = sigma_max;
    const c10::Device device = model.module().parameters().front().device();
    const at::Tensor conditioning = labels.min().item<std::int64_t>() < 0 ? at::Tensor() : labels.to(device);
    std::vector<at::Tensor> out;
    for (std::int64_t i = 0; i < noise.size(0); i += 250) {
      const at::Tensor batch_labels = conditioning.defined() ? conditioning.slice(0, i, i + 250) : at::Tensor();
      out.push_back(diffusion::edm_sample(model, noise.slice(0, i, i + 250).to(device), batch_labels, 0.0, o, generator));
    }
    return at::cat(out);
  }

  // Each class's next generation from its own thresholded counts (post-processing of the release). A
  // class whose counts the threshold all removed keeps its generation, drawn uniformly, and says so.
  at::Tensor resample(const at::Tensor& weights, const at::Tensor& labels, std::int64_t classes, std::uint64_t seed,
                      std::vector<std::string>& log) const {
    const std::int64_t groups = std::max<std::int64_t>(classes, 1);
    std::vector<at::Tensor> chosen;
    for (std::int64_t c = 0; c < groups; ++c) {
      const at::Tensor rows = classes == 0 ? at::arange(labels.size(0), at::kLong) : (labels == c).nonzero().reshape({-1});
      at::Tensor w = weights.index({rows});
      if (w.sum().item<double>() <= 0) {
        log.push_back("private_evolution: every count of class " + std::to_string(c) +
                      " fell below the threshold; its images are drawn uniformly");
        w = at::ones_like(w);
      }
      chosen.push_back(rows.index({engine::resample_by_votes(w, samples_per_class_, seed * 1000 + c)}));
    }
    return at::cat(chosen);
  }

  std::string path_;
  std::string public_data_;
  std::int64_t iterations_ = 5, samples_per_class_ = 100;
  engine::NearestNeighbourVoteOptions o_;
  bool calibrated_ = false;
  double variation_sigma_ = 1.0;
  bool pixel_embedding_ = false;
  diffusion::EdmSamplerOptions sampler_;
  evaluation::PublicClassifierOptions classifier_;
  engine::ReleaseNoise noise_;
};

namespace {
Schema schema() {
  Schema schema;
  schema
      .add(Key::string("public_data").doc("the [data.NAME] section of public data the embedding classifier trains on"))
      .add(Key::integer("iterations").at_least(1).at_most(1000).defaults(5).doc("T: vote histograms released (one ledger event each)"))
      .add(Key::integer("samples_per_class").at_least(2).at_most(100000).defaults(100)
               .doc("synthetic images per class (the whole set for a model without classes); the release's size"))
      .add(Key::integer("votes_per_record").at_least(1).defaults(1)
               .doc("nearest synthetic images each private image votes for (sensitivity sqrt of it)"))
      .add(Key::number("noise_multiplier").greater_than(0).or_keyword("auto").defaults("auto")
               .doc("sigma: each histogram's noise std over its sensitivity; \"auto\": calibrated to [privacy] epsilon"))
      .add(Key::number("threshold").at_least(0).defaults(2.0).doc("H: subtracted from every noisy count, clamped at 0"))
      .add(Key::number("variation_sigma").greater_than(0).at_most(80).defaults(1.0)
               .doc("the noise level (EDM sigma) a variation starts from: larger, further from its parent"))
      .add(Key::integer("sampler_steps").at_least(2).at_most(1000).defaults(18).doc("Heun steps of each generation"))
      .add(Key::string("embedding").one_of({"classifier", "pixels"}).defaults("classifier")
               .doc("where votes measure distance: \"classifier\", the logits of a classifier trained on public_data "
                    "(the paper's Inception features' stand-in); \"pixels\", the images themselves (no classifier)"));
  evaluation::add_public_classifier_keys(schema, "the embedding");
  engine::add_release_noise_keys(schema);
  return schema;
}

void register_components(Registrar* registrar) {
  registrar->add<PrivateEvolution>("private_evolution",
                                   "Private Evolution: a synthetic set evolved from a public generator's samples by "
                                   "noisy nearest-neighbour votes of the private data, trains nothing",
                                   schema());
}
}  // namespace

}  // namespace privdiff::plugins::private_evolution

PRIVDIFF_PLUGIN("private_evolution", "0.1.0", "Private Evolution", privdiff::plugins::private_evolution::register_components)
