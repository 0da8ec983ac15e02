// feature_cnn: Fréchet distance and k-NN precision/recall on the penultimate features of DPDM's CNN,
// trained once on the real reference split and cached by content hash. Its own features, not
// Inception's: the numbers are not comparable with published FID (the `inception` evaluator's are).
// The same CNN, trained on real data only, also says how often it recognises a sample's label in the
// sample: label alignment of a class-conditional model, text alignment of a text-conditioned one whose
// samples are labelled by their prompts ([[eval]] labels = "prompts").
#include "dpdm_classifier_nets.hpp"
#include "dpdm_evaluators.hpp"

#include <privdiff/data/pixels.hpp>
#include <privdiff/evaluation/feature_statistics.hpp>
#include <privdiff/evaluation/validation_split.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/content_hash.hpp>

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>

namespace privdiff::plugins::dpdm_evaluation {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t feature_seed = 20240101;  // fixed: every evaluation uses the same feature network

std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.nbytes()));
}

class FeatureCnnEvaluator : public Evaluator {
 public:
  explicit FeatureCnnEvaluator(const Config& c)
      : feature_epochs_(c.get_int("feature_epochs")), pr_samples_(c.get_int("pr_samples")) {}

  std::vector<std::string> metric_names() const override {
    return {"frechet_distance", "frechet_floor", "precision", "recall", "alignment"};
  }

  EvaluationResult evaluate(const EvaluationInput& in) override {
    const LabelledImages& reference = in.real(in.reference_split);
    std::string description;
    auto net = feature_network(in, reference, description);
    const at::Tensor reference_features = penultimate_features(*net, reference.images);
    const at::Tensor set_features = penultimate_features(*net, in.samples.images);
    const evaluation::GaussianFit reference_fit = evaluation::fit_gaussian(reference_features);
    EvaluationResult result;
    result.metrics.emplace_back("frechet_distance",
                                evaluation::frechet_distance(evaluation::fit_gaussian(set_features), reference_fit));
    result.metrics.emplace_back("frechet_floor", floor(in, *net, reference_features, reference_fit));
    const std::int64_t pr_real = std::min(pr_samples_, reference_features.size(0));
    const std::int64_t pr_set = std::min(pr_samples_, set_features.size(0));
    const auto pr = evaluation::precision_recall(reference_features.narrow(0, 0, pr_real), set_features.narrow(0, 0, pr_set));
    result.metrics.emplace_back("precision", pr.precision);
    result.metrics.emplace_back("recall", pr.recall);
    // The real-trained CNN's top-1 agreement with the samples' labels (a prompt's class, or the label
    // sampled with); chance is 1 / classes.
    const double alignment = in.samples.labels.defined()
                                 ? evaluation::classifier_accuracy(*net, in.samples.images, in.samples.labels)
                                 : std::nan("");
    result.metrics.emplace_back("alignment", alignment);
    result.provenance = description + "; alignment: how often that CNN names each sample's label (chance " +
                        std::to_string(1.0 / static_cast<double>(in.num_classes)).substr(0, 5) + ")";
    result.counts = {{"samples", set_features.size(0)}, {"reference", reference_features.size(0)},
                     {"pr_samples", pr_set}, {"pr_reference", pr_real}};
    *in.log << "  Fréchet distance " << std::setprecision(4) << result.metrics[0].second << " (floor "
            << result.metrics[1].second << "), precision " << pr.precision << ", recall " << pr.recall
            << ", alignment " << alignment << "\n";
    return result;
  }

 private:
  /// What a real set scores: real test vs the training reference, or the test split's two halves.
  double floor(const EvaluationInput& in, DpdmClassifierNet& net, const at::Tensor& reference_features,
               const evaluation::GaussianFit& reference_fit) const {
    if (in.reference_split != "test") {
      return evaluation::frechet_distance(
          evaluation::fit_gaussian(penultimate_features(net, in.real("test").images)), reference_fit);
    }
    return evaluation::half_split_frechet_distance(reference_features);
  }

  /// The CNN trained on the reference split, once per (data, training settings), from the cache.
  std::shared_ptr<DpdmClassifierNet> feature_network(const EvaluationInput& in, const LabelledImages& reference,
                                                     std::string& description) const {
    const std::string key = content_hash(bytes_of(pixels_to_bytes(reference.images)) +
                                         bytes_of(reference.labels.to(at::kByte)) + "|feature-cnn-v2|epochs=" +
                                         std::to_string(feature_epochs_) + "|seed=" + std::to_string(feature_seed));
    const fs::path file = in.cache_dir / ("feature-cnn-" + key + ".pt");
    description = "penultimate 128-d features of DPDM's CNN trained " + std::to_string(feature_epochs_) + " epochs on " +
                  in.real_name + " " + in.reference_split + " (seed " + std::to_string(feature_seed) + "; cache " +
                  file.filename().string() + "); not Inception, so not comparable with published FID";
    at::manual_seed(feature_seed);
    auto net = std::make_shared<DpdmClassifierNet>(DpdmClassifier::cnn, in.num_classes, reference.images.size(1),
                                                   reference.images.size(2));
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) {
      try {
        torch::serialize::InputArchive archive;
        archive.load_from(file.string());
        net->load(archive);
        net->to(in.device);
        *in.log << "  feature network: " << file.string() << " (cached)\n";
        return net;
      } catch (const std::exception&) {
        *in.log << "  feature network cache " << file.string() << " is unreadable; retraining\n";
      }
    }
    *in.log << "  feature network: training the CNN on " << in.real_name << " " << in.reference_split << " ("
            << feature_epochs_ << " epochs, once; cached in " << file.parent_path().string() << ")\n" << std::flush;
    const auto split = evaluation::split_for_validation(reference, reference.count() / 10, feature_seed);
    evaluation::train_selecting_epoch(*net, split.train.images, split.train.labels, split.validation.images,
                                      split.validation.labels, dpdm_schedule(feature_epochs_), in.device, feature_seed,
                                      *in.log);
    fs::create_directories(file.parent_path(), ec);
    torch::serialize::OutputArchive archive;
    net->save(archive);
    std::ostringstream serialised;
    archive.save_to(serialised);
    write_file_atomically(file, serialised.str());
    return net;
  }

  std::int64_t feature_epochs_, pr_samples_;
};

}  // namespace

void register_feature_cnn(Registrar* registrar) {
  registrar->add<FeatureCnnEvaluator>(
      "feature_cnn",
      "Fréchet distance and k-NN precision/recall on DPDM's CNN features (trained once on the real reference, "
      "cached); not Inception FID",
      Schema{}
          .add(Key::integer("feature_epochs").at_least(1).defaults(5).doc("training of the feature CNN (part of its cache key)"))
          .add(Key::integer("pr_samples").at_least(4).defaults(10000)
                   .doc("images per set for precision/recall (its cost is quadratic)")));
}

}  // namespace privdiff::plugins::dpdm_evaluation
