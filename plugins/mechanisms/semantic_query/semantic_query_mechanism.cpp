// semantic_query: PrivImage's first stage (Li et al., USENIX Security 2024). A classifier trained on
// the public data labels each private image with its top_k public classes; the per-class histogram
// of those labels is released with the Gaussian mechanism (engine/semantic_query.hpp), and the
// public images of the classes it selects are released as a dataset named after the stage, for a
// non-private pretraining stage. The classifier sees public data only.
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/engine/semantic_query.hpp>
#include <privdiff/evaluation/benchmark_classifiers.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::plugins::semantic_query {

using namespace privdiff::sdk;

// The public classifier's settings (outside the anonymous namespace: the mechanism holds one).
struct ClassifierOptions {
  std::int64_t depth = 8, epochs = 3, batch_size = 128;
  double lr = 1e-3;
};

namespace {

// The public classifier's logits for `images`: a ResNet trained on the public data alone (9 in 10 of
// its records; the tenth selects the epoch), seeded from public configuration. `public_labels`: all
// of the public data's labels, in order.
at::Tensor public_logits(const Dataset& public_data, const at::Tensor& public_labels, const at::Tensor& images,
                         const ClassifierOptions& o, std::uint64_t seed) {
  const at::Tensor order = at::randperm(public_data.size(), at::make_generator<at::CPUGeneratorImpl>(seed));
  const std::int64_t held = std::max<std::int64_t>(1, public_data.size() / 10);
  const at::Tensor x = public_data.images(order), y = public_labels.index({order});
  at::manual_seed(seed);
  auto net = evaluation::make_benchmark_classifier(
      evaluation::BenchmarkArchitecture{evaluation::BenchmarkNetwork::resnet, o.depth}, x.size(1), x.size(2),
      public_data.num_classes());
  evaluation::ClassifierSchedule schedule;
  schedule.epochs = o.epochs;
  schedule.batch_size = o.batch_size;
  schedule.lr = o.lr;
  std::cout << "semantic_query: training the public classifier (ResNet-" << o.depth << ", "
            << public_data.num_classes() << " public classes) on " << public_data.name() << "\n";
  const auto kept = evaluation::train_selecting_epoch(*net, x.slice(0, held), y.slice(0, held), x.slice(0, 0, held),
                                                      y.slice(0, 0, held), schedule, at::kCPU, seed, std::cout);
  std::cout << "semantic_query: public validation accuracy " << kept.validation_accuracy << "\n";
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> logits;
  for (std::int64_t i = 0; i < images.size(0); i += 500) logits.push_back(net->forward(images.slice(0, i, i + 500)));
  return at::cat(logits).to(at::kDouble);
}

// "3 7": a row of selected public classes, for the log (public: the release's post-processing).
std::string listed(const at::Tensor& row) {
  std::string text;
  for (std::int64_t i = 0; i < row.numel(); ++i) text += (i ? " " : "") + std::to_string(row[i].item<std::int64_t>());
  return text;
}

}  // namespace

class SemanticQuery : public Mechanism {
 public:
  explicit SemanticQuery(const Config& c) : public_data_(c.get_string("public_data")) {
    o_.top_k = c.get_int("top_k");
    o_.select = c.get_int("select");
    o_.noise_multiplier = c.get_double("noise_multiplier");
    images_per_class_ = c.get_int("images_per_class");
    classifier_ = {c.get_int("classifier_depth"), c.get_int("classifier_epochs"), c.get_int("classifier_batch_size"),
                   c.get_double("classifier_lr")};
    secure_ = c.get_bool("secure_noise");
    if (c.has("seed")) {
      if (secure_) throw std::invalid_argument(c.path() + ".seed: only with secure_noise = false (reproducible noise)");
      seed_ = static_cast<std::uint64_t>(c.get_int("seed"));
    }
    if ((classifier_.depth - 2) % 6 != 0) {
      throw std::invalid_argument(c.path() + ".classifier_depth: a ResNet's depth is 6n + 2 (8, 14, 20, ...), got " +
                                  std::to_string(classifier_.depth));
    }
    engine::semantic_query_event(o_);  // checks the options
  }

  bool is_private() const override { return true; }
  PrivacyEvent planned_events(std::int64_t) const override { return engine::semantic_query_event(o_); }
  // sigma is fixed (never "auto"): the host's checks ask with any sigma, the answer is the plan.
  PrivacyEvent planned_events_with(double, std::int64_t n) const override { return planned_events(n); }
  std::optional<double> noise_multiplier() const override { return o_.noise_multiplier; }
  std::optional<std::string> public_data_name() const override { return public_data_; }
  std::int64_t released_examples(std::int64_t, std::int64_t classes) const override {
    return images_per_class_ * classes;
  }

  void run(StageContext& context) override {
    if (!context.release || !context.public_data) {
      throw std::logic_error("semantic_query: the host gave the stage no public data or nowhere to release to");
    }
    if (context.resume) throw std::runtime_error("semantic_query cannot resume mid-stage: its query is spent");
    const Dataset& pub = *context.public_data;
    if (o_.top_k > pub.num_classes() || o_.select > pub.num_classes()) {
      throw std::invalid_argument("semantic_query: top_k and select must be at most the public data's " +
                                  std::to_string(pub.num_classes()) + " classes");
    }
    // Every public class must hold a record, or a selection of it could not be released after the
    // query is spent (public data only: checked before anything private is read).
    const at::Tensor public_labels = pub.labels(at::arange(pub.size(), at::kLong));
    const at::Tensor counts = at::bincount(public_labels, {}, pub.num_classes());
    if (counts.min().item<std::int64_t>() == 0) {
      throw std::invalid_argument("semantic_query: public_data " + pub.name() + " has a class without records (class " +
                                  std::to_string(counts.argmin().item<std::int64_t>()) + ")");
    }
    const at::Tensor all = at::arange(context.data.size(), at::kLong);
    const at::Tensor logits = public_logits(pub, public_labels, context.data.images(all), classifier_, context.seed);
    const at::Tensor histogram =
        engine::semantic_histogram(logits, context.data.labels(all), context.num_classes, o_.top_k);
    const std::uint64_t seed = seed_.value_or(context.seed);
    const auto stage = static_cast<std::uint64_t>(context.stage_index);
    engine::GaussianNoise noise(secure_ ? engine::RandomStream::secret(engine::StreamPurpose::noise)
                                        : engine::RandomStream::reproducible(seed, stage, engine::StreamPurpose::noise));
    if (!secure_) context.ledger.add_caveat(engine::reproducible_noise_caveat());
    const auto selection = engine::release_semantic_selection(histogram, o_, noise);
    // The query is spent from here on; nothing leaves the stage (not even the log's selection) before
    // the host's release writes the ledger.
    context.ledger.record(engine::semantic_query_event(o_));
    const auto [indices, labels] =
        engine::selected_public_records(public_labels, selection.selected, images_per_class_, context.seed);
    context.release(pub.images(indices), labels);
    for (std::int64_t c = 0; c < context.num_classes; ++c) {
      std::cout << "semantic_query: class " << c << " selects public classes " << listed(selection.selected[c]) << "\n";
    }
    if (context.step_done) context.step_done(StepReport{1, 1, 0.0, 0, {}}, [](torch::serialize::OutputArchive&) {});
  }

 private:
  std::string public_data_;
  engine::SemanticQueryOptions o_;
  std::int64_t images_per_class_ = 1000;
  ClassifierOptions classifier_;
  bool secure_ = true;
  std::optional<std::uint64_t> seed_;
};

namespace {
Schema schema() {
  return Schema{}
      .add(Key::string("public_data").doc("the [data.NAME] section of public data to classify with and select from"))
      .add(Key::integer("top_k").at_least(1).defaults(2).doc("public classes counted per private image (sensitivity sqrt(top_k))"))
      .add(Key::integer("select").at_least(1).defaults(2).doc("public classes kept per private class"))
      .add(Key::number("noise_multiplier").greater_than(0).defaults(100.0)
               .doc("sigma: the histogram's noise std over its sensitivity sqrt(top_k) (PrivImage's sigma1)"))
      .add(Key::integer("images_per_class").at_least(1).defaults(1000)
               .doc("public images released per private class, drawn from its selected public classes"))
      .add(Key::integer("classifier_depth").at_least(8).defaults(8).doc("the public classifier: ResNet of this depth (6n + 2)"))
      .add(Key::integer("classifier_epochs").at_least(1).defaults(3).doc("its epochs on the public data"))
      .add(Key::integer("classifier_batch_size").at_least(1).defaults(128).doc("its batch size"))
      .add(Key::number("classifier_lr").greater_than(0).defaults(1e-3).doc("its Adam learning rate"))
      .add(Key::boolean("secure_noise").defaults(true).doc("noise from the OS CSPRNG (false: from the seed)"))
      .add(Key::integer("seed").at_least(0).optional().doc("only with secure_noise = false"));
}

void register_components(Registrar* registrar) {
  registrar->add<SemanticQuery>("semantic_query",
                                "PrivImage's semantic query: releases the public data whose classes the private data "
                                "resemble, selected by a noisy histogram",
                                schema());
}
}  // namespace

}  // namespace privdiff::plugins::semantic_query

PRIVDIFF_PLUGIN("semantic_query", "0.1.0", "PrivImage's semantic query",
                privdiff::plugins::semantic_query::register_components)
