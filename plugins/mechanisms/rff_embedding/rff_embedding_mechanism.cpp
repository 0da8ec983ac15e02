// rff_embedding: FETA-Pro's frequency stage (Gong et al., USENIX Security '26). Releases the private
// data's class-conditional mean embedding in random Fourier features once (DP-MERF), trains an
// auxiliary generator on it by MMD (post-processing) and releases the generator's images as a
// dataset named after the stage, for a non-private warm-up (engine/rff_embedding.hpp,
// engine/mmd_generator.hpp).
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/engine/mmd_generator.hpp>
#include <privdiff/engine/release_noise.hpp>
#include <privdiff/engine/rff_embedding.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace privdiff::plugins::rff_embedding {

using namespace privdiff::sdk;

class RffEmbedding : public Mechanism {
 public:
  explicit RffEmbedding(const Config& c) {
    rff_.features = c.get_int("features");
    rff_.length_scale = std::sqrt(c.get_double("rff_sigma"));
    rff_.noise_multiplier = c.get_double("noise_multiplier");
    gen_.latent_dim = c.get_int("latent_dim");
    gen_.channels = c.get_int("generator_channels");
    gen_.steps = c.get_int("generator_steps");
    gen_.batch_size = c.get_int("generator_batch_size");
    gen_.lr = c.get_double("generator_lr");
    gen_.lr_decay = c.get_double("generator_lr_decay");
    gen_.decay_every = c.get_int("generator_decay_every");
    per_class_ = c.get_int("images_per_class");
    noise_ = engine::ReleaseNoise::from(c);
    engine::rff_embedding_event(rff_);  // checks the options
  }

  bool is_private() const override { return true; }
  PrivacyEvent planned_events(std::int64_t) const override { return engine::rff_embedding_event(rff_); }
  // sigma is fixed (never "auto"): the host's size checks ask with any sigma, the answer is the plan.
  PrivacyEvent planned_events_with(double, std::int64_t n) const override { return planned_events(n); }
  std::optional<double> noise_multiplier() const override { return rff_.noise_multiplier; }
  std::int64_t released_examples(std::int64_t, std::int64_t classes) const override { return per_class_ * classes; }

  void run(StageContext& context) override {
    if (!context.release) throw std::logic_error("rff_embedding: the host gave the stage nowhere to release to");
    if (context.resume) throw std::runtime_error("rff_embedding cannot resume mid-stage: its release is spent; start a new run");
    if (context.num_classes < 1) throw std::invalid_argument("rff_embedding needs a class-conditional model (num_classes >= 1)");
    const Dataset& data = context.data;
    const at::Tensor all = at::arange(data.size(), at::kLong);
    const at::Tensor images = data.images(all);
    // Public randomness (the stage's seed): the frequencies, the generator's weights and draws.
    const std::uint64_t seed = context.seed * 1000003ULL + static_cast<std::uint64_t>(context.stage_index);
    const at::Tensor frequencies = engine::rff_frequencies(images[0].numel(), rff_, seed);
    engine::GaussianNoise noise(noise_.stream(context, engine::StreamPurpose::noise));
    const at::Tensor noisy = engine::rff_noisy_class_sums(images, data.labels(all), context.num_classes, frequencies, rff_, noise);
    context.ledger.record(engine::rff_embedding_event(rff_));  // nothing leaves the stage before this
    if (context.released_statistic) {
      context.released_statistic({"noisy random-feature class sums", noisy, 1.0, rff_.noise_multiplier, false});
    }
    const at::Tensor target = noisy / static_cast<double>(data.size());  // the public N, never class counts
    torch::manual_seed(seed);  // the generator's initial weights
    engine::ConditionalGenerator generator(context.num_classes, images.size(1), images.size(2), gen_);
    engine::fit_mmd_generator(generator, target, frequencies, gen_, seed + 1, [&](std::int64_t step, double loss) {
      std::printf("  generator step %lld/%lld  mmd %.6g\n", static_cast<long long>(step),
                  static_cast<long long>(gen_.steps), loss);
      std::fflush(stdout);
    });
    const auto [released, labels] = engine::generate_images(generator, context.num_classes, per_class_, seed + 2);
    context.release(released, labels);
    StepReport report;  // the release is the stage's one step
    report.step = report.total_steps = 1;
    if (context.step_done) context.step_done(report, [](torch::serialize::OutputArchive&) {});
  }

 private:
  engine::RffOptions rff_;
  engine::MmdGeneratorOptions gen_;
  std::int64_t per_class_ = 6000;
  engine::ReleaseNoise noise_;
};

namespace {
Schema schema() {
  Schema schema;
  schema
      .add(Key::integer("features").at_least(2).at_most(1000000).defaults(10000)
               .doc("D (d_rff): random Fourier features, the cos and sin of D / 2 frequencies; even"))
      .add(Key::number("rff_sigma").greater_than(0).defaults(105.0)
               .doc("the kernel's width squared: frequencies ~ N(0, 1 / rff_sigma) over pixels in [0, 1] (FETA-Pro's 105)"))
      .add(Key::number("noise_multiplier").greater_than(0).defaults(7.4)
               .doc("sigma_freq: noise std on the class sums, whose L2 sensitivity is 1 (FETA-Pro: 7.4 at epsilon 10, "
                    "26.6 at 1)"))
      .add(Key::integer("images_per_class").at_least(1).at_most(100000).defaults(6000)
               .doc("images the generator releases per class (FETA-Pro: 6,000)"))
      .add(Key::integer("latent_dim").at_least(1).at_most(4096).defaults(60).doc("the generator's z"))
      .add(Key::integer("generator_channels").at_least(1).at_most(1024).defaults(64)
               .doc("the generator's feature maps (FETA-Pro's BigGAN: 164)"))
      .add(Key::integer("generator_steps").at_least(1).at_most(10000000).defaults(2750)
               .doc("Adam steps on the MMD loss (FETA-Pro: 5 epochs x 550)"))
      .add(Key::integer("generator_batch_size").at_least(1).at_most(100000).defaults(100).doc("images per generator step"))
      .add(Key::number("generator_lr").greater_than(0).defaults(0.01).doc("the generator's Adam learning rate"))
      .add(Key::number("generator_lr_decay").greater_than(0).at_most(1).defaults(0.9)
               .doc("multiplied into the learning rate every generator_decay_every steps"))
      .add(Key::integer("generator_decay_every").at_least(1).defaults(550).doc("steps between learning-rate decays"));
  engine::add_release_noise_keys(schema, "noise");
  return schema;
}

void register_components(Registrar* registrar) {
  registrar->add<RffEmbedding>("rff_embedding",
                               "FETA-Pro's frequency stage: a noisy random-feature mean embedding, and the images of a "
                               "generator fitted to it, for a warm-up",
                               schema());
}
}  // namespace

}  // namespace privdiff::plugins::rff_embedding

PRIVDIFF_PLUGIN("rff_embedding", "0.1.0", "FETA-Pro's random-feature release", privdiff::plugins::rff_embedding::register_components)
