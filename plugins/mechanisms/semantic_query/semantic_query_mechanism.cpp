// semantic_query: PrivImage's first stage (Li et al., USENIX Security 2024). A classifier trained on
// the public data labels each private image with its top_k public classes; the per-class histogram
// of those labels is released with the Gaussian mechanism (engine/semantic_query.hpp), and the
// public images of the classes it selects are released as a dataset named after the stage, for a
// non-private pretraining stage. The classifier sees public data only.
#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/random_stream.hpp>
#include <privdiff/engine/release_noise.hpp>
#include <privdiff/engine/semantic_query.hpp>
#include <privdiff/evaluation/public_classifier.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>

#include <iostream>
#include <optional>
#include <string>
#include <utility>

namespace privdiff::plugins::semantic_query {

using namespace privdiff::sdk;

namespace {

// "3 7": a row of selected public classes, for the log (public: the release's post-processing).
std::string listed(const at::Tensor& row) {
  std::string text;
  for (std::int64_t i = 0; i < row.numel(); ++i) {
    if (i > 0) text += ' ';
    text += std::to_string(row[i].item<std::int64_t>());
  }
  return text;
}

}  // namespace

class SemanticQuery : public Mechanism {
 public:
  explicit SemanticQuery(const Config& c) : path_(c.path()), public_data_(c.get_string("public_data")) {
    o_.top_k = c.get_int("top_k");
    o_.select = c.get_int("select");
    o_.noise_multiplier = c.get_double("noise_multiplier");
    images_per_class_ = c.get_int("images_per_class");
    classifier_ = evaluation::public_classifier_options(c);
    noise_ = engine::ReleaseNoise::from(c);
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

  void check_public_data(const Dataset& pub) const override {
    const std::int64_t classes = pub.num_classes();
    for (const auto& [key, value] : {std::pair<const char*, std::int64_t>{"top_k", o_.top_k}, {"select", o_.select}}) {
      if (value > classes) {
        throw KeyValueError(path_ + "." + key, std::to_string(value) + " is more than the public data's " +
                                           std::to_string(classes) + " classes (" + pub.name() + ")");
      }
    }
    // Every public class must hold a record, or a selection of it could not be released after the
    // query is spent.
    const at::Tensor counts = at::bincount(pub.labels(at::arange(pub.size(), at::kLong)), {}, classes);
    if (counts.min().item<std::int64_t>() == 0) {
      throw KeyValueError(path_ + ".public_data", "class " + std::to_string(counts.argmin().item<std::int64_t>()) + " of " +
                                                    pub.name() + " holds no record (every class may be selected)");
    }
  }

  void run(StageContext& context) override {
    if (!context.release || !context.public_data) {
      throw std::logic_error("semantic_query: the host gave the stage no public data or nowhere to release to");
    }
    if (context.resume) throw std::runtime_error("semantic_query cannot resume mid-stage: its query is spent");
    const Dataset& pub = *context.public_data;
    check_public_data(pub);  // (the host has; public data only, before anything private is read)
    const at::Tensor public_labels = pub.labels(at::arange(pub.size(), at::kLong));
    const at::Tensor all = at::arange(context.data.size(), at::kLong);
    const evaluation::PublicClassifier classifier(pub, public_labels, classifier_, context.seed, std::cout, "semantic_query");
    std::cout << "semantic_query: classifying the private images (their counts stay hidden until the noisy "
              << "histogram is released)\n" << std::flush;
    const at::Tensor logits = classifier.logits(context.data.images(all));
    const at::Tensor histogram =
        engine::semantic_histogram(logits, context.data.labels(all), context.num_classes, o_.top_k);
    engine::GaussianNoise noise(noise_.stream(context, engine::StreamPurpose::noise));
    const auto selection = engine::release_semantic_selection(histogram, o_, noise);
    // The query is spent from here on; nothing leaves the stage (not even the log's selection) before
    // the host's release writes the ledger.
    context.ledger.record(engine::semantic_query_event(o_));
    if (context.released_statistic) {
      const double sensitivity = engine::semantic_query_sensitivity(o_.top_k);
      context.released_statistic(
          {"semantic histogram", selection.noisy_histogram, sensitivity, o_.noise_multiplier * sensitivity, false});
    }
    const auto [indices, labels] =
        engine::selected_public_records(public_labels, selection.selected, images_per_class_, context.seed);
    context.release(pub.images(indices), labels);
    for (std::int64_t c = 0; c < context.num_classes; ++c) {
      std::cout << "semantic_query: class " << c << " selects public classes " << listed(selection.selected[c]) << "\n";
    }
    StepReport report;  // the release is the stage's one step
    report.step = report.total_steps = 1;
    if (context.step_done) context.step_done(report, [](torch::serialize::OutputArchive&) {});
  }

 private:
  std::string path_;
  std::string public_data_;
  engine::SemanticQueryOptions o_;
  std::int64_t images_per_class_ = 1000;
  evaluation::PublicClassifierOptions classifier_;
  engine::ReleaseNoise noise_;
};

namespace {
Schema schema() {
  Schema schema;
  schema
      .add(Key::string("public_data").doc("the [data.NAME] section of public data to classify with and select from"))
      .add(Key::integer("top_k").at_least(1).defaults(2).doc("public classes counted per private image (sensitivity sqrt(top_k))"))
      .add(Key::integer("select").at_least(1).defaults(2).doc("public classes kept per private class"))
      .add(Key::number("noise_multiplier").greater_than(0).defaults(100.0)
               .doc("sigma: the histogram's noise std over its sensitivity sqrt(top_k) (PrivImage's sigma1)"))
      .add(Key::integer("images_per_class").at_least(1).at_most(100000).defaults(1000)
               .doc("public images released per private class, drawn from its selected public classes"));
  evaluation::add_public_classifier_keys(schema, "the public classifier");
  engine::add_release_noise_keys(schema);
  return schema;
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
