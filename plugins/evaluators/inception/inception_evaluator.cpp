// inception: the metrics every paper of the field reports, on Inception-V3 as pytorch-fid uses it
// (sdk/evaluation/inception_v3.hpp): FID on pool3 features against the real reference split,
// Inception Score (10 splits) of the samples, and k-NN precision/recall on pool3 features. The
// weights are the user's copy of pytorch-fid's file (nothing is downloaded), loaded and verified
// when the evaluator is made (a recipe with wrong weights fails before training): anything but
// pytorch-fid's weights is refused, or with allow_unverified_weights (tests) scored under metric
// names ending in "_not_comparable", with a provenance and a caveat that say so. The reference
// statistics are computed once per (data, weights) and cached by content hash.
#include <privdiff/components/evaluator.hpp>
#include <privdiff/evaluation/feature_statistics.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/evaluation/inception_v3.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/content_hash.hpp>
#include <privdiff/data/pixels.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cstdlib>
#include <iomanip>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace privdiff::plugins::inception {

using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

constexpr const char* weights_variable = "PRIVDIFF_INCEPTION_WEIGHTS";

fs::path weights_file(const Config& c) {
  std::string path = c.get_string("weights");
  if (path.empty()) {
    const char* from_environment = std::getenv(weights_variable);
    path = from_environment ? from_environment : "";
  }
  if (path.empty()) {
    throw std::invalid_argument(
        c.path() + ".weights: the inception evaluator needs pytorch-fid's Inception weights "
        "(pt_inception-2015-12-05-6726825d.pth, from pytorch-fid's GitHub releases; nothing is downloaded here): set "
        "weights = \"FILE\" or $" + std::string(weights_variable));
  }
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw KeyValueError(c.path() + ".weights", path + " is not a file");
  return path;
}

std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.nbytes()));
}

/// What the reference split gives every evaluation: its Gaussian fit, the features precision/recall
/// use, and the floor (what real held-out images score).
struct ReferenceStatistics {
  evaluation::GaussianFit fit;
  at::Tensor pr_features;
  double floor = 0;
};

/// The weights, checked: a file that is not pytorch-fid's network is input the user can fix.
evaluation::FidInceptionWeights load_weights(const Config& c, const fs::path& file) {
  const bool allow_unverified = c.get_bool("allow_unverified_weights");
  try {
    return evaluation::load_fid_inception(file, allow_unverified);
  } catch (const evaluation::UnverifiedInceptionWeights& e) {
    throw KeyValueError(c.path() + ".weights", std::string(e.what()) + " (for tests, allow_unverified_weights = true "
                                "accepts them and labels every result not comparable)");
  } catch (const std::runtime_error& e) {
    throw KeyValueError(c.path() + ".weights", e.what());
  }
}

class InceptionEvaluator : public Evaluator {
 public:
  explicit InceptionEvaluator(const Config& c)
      : weights_(weights_file(c)), loaded_(load_weights(c, weights_)), network_(loaded_.network),
        batch_size_(c.get_int("batch_size")), splits_(c.get_int("is_splits")),
        pr_samples_(c.get_int("pr_samples")) {}

  std::vector<std::string> metric_names() const override {
    const std::string suffix = loaded_.verified ? "" : "_not_comparable";
    std::vector<std::string> names;
    for (const char* name : {"fid", "fid_floor", "inception_score", "inception_score_std", "precision", "recall"}) {
      names.push_back(name + suffix);
    }
    return names;
  }

  EvaluationResult evaluate(const EvaluationInput& in) override {
    const std::string suffix = loaded_.verified ? "" : "_not_comparable";
    if (!loaded_.verified) {
      *in.log << "  Inception-V3 weights " << weights_.string() << " are not pytorch-fid's ("
              << loaded_.unverified_reason << "): every number is labelled not comparable\n";
    }
    network_->to(in.device);
    *in.log << "  Inception features of " << in.samples.count() << " samples\n" << std::flush;
    const evaluation::InceptionOutputs samples = evaluation::inception_features(*network_, in.samples.images, batch_size_);
    const ReferenceStatistics reference = reference_statistics(in);
    EvaluationResult result;
    // Numbers from other weights never share a name (nor a compare column) with comparable ones.
    result.metrics.emplace_back("fid" + suffix,
                                evaluation::frechet_distance(evaluation::fit_gaussian(samples.pool3), reference.fit));
    result.metrics.emplace_back("fid_floor" + suffix, reference.floor);
    const evaluation::InceptionScore score = evaluation::inception_score(unbiased_logits(samples.pool3), splits_);
    result.metrics.emplace_back("inception_score" + suffix, score.mean);
    result.metrics.emplace_back("inception_score_std" + suffix, score.std);
    const std::int64_t pr_set = std::min(pr_samples_, samples.pool3.size(0));
    const auto pr = evaluation::precision_recall(reference.pr_features, samples.pool3.narrow(0, 0, pr_set));
    result.metrics.emplace_back("precision" + suffix, pr.precision);
    result.metrics.emplace_back("recall" + suffix, pr.recall);
    const std::string file = weights_.filename().string();
    const std::string weights =
        loaded_.verified ? "pytorch-fid's weights " + file + " (converted from SHA-256 " +
                               std::string(evaluation::pytorch_fid_weights_sha256).substr(0, 16) + "..., verified)"
                         : "UNVERIFIED weights " + file + " (" + loaded_.unverified_reason + ")";
    result.provenance = std::string(loaded_.verified ? "" : "NOT COMPARABLE with published FIDs: ") +
                        "Inception-V3 as pytorch-fid (pool3 features, 1008 logits, 299x299 bilinear), " + weights +
                        ", tensors SHA-256 " + loaded_.tensors_sha256.substr(0, 16) + "...; FID against " +
                        in.real_name + " " + in.reference_split + ", IS (fc without bias, as the original) in " +
                        std::to_string(splits_) + " splits";
    if (!loaded_.verified) {
      result.caveats.push_back("not comparable with published FIDs: the Inception weights " + file +
                               " are not pytorch-fid's (" + loaded_.unverified_reason +
                               "); allow_unverified_weights is for tests");
    }
    result.counts = {{"samples", samples.pool3.size(0)}, {"reference", reference.fit.count},
                     {"pr_samples", pr_set}, {"pr_reference", reference.pr_features.size(0)}};
    if (samples.pool3.size(0) < 10000) {
      result.caveats.push_back("FID on " + std::to_string(samples.pool3.size(0)) + " samples: FID is biased upwards for "
                               "small sets; published numbers use 10,000 to 60,000");
    }
    *in.log << "  " << (loaded_.verified ? "" : "NOT COMPARABLE: ") << "FID " << std::setprecision(5)
            << result.metrics[0].second << " (floor " << reference.floor << "), IS " << score.mean << " ± " << score.std
            << ", precision " << pr.precision << ", recall " << pr.recall << "\n";
    return result;
  }

 private:
  ReferenceStatistics reference_statistics(const EvaluationInput& in) {
    const LabelledImages& reference = in.real(in.reference_split);
    const std::string key =
        content_hash(bytes_of(pixels_to_bytes(reference.images)) + "|inception-reference-v2|" + loaded_.tensors_sha256 +
                     "|pr=" + std::to_string(pr_samples_) + "|" + in.reference_split);
    const fs::path file = in.cache_dir / ("inception-reference-" + key + ".pt");
    ReferenceStatistics stats;
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) {
      try {
        torch::serialize::InputArchive archive;
        archive.load_from(file.string());
        at::Tensor floor, count;
        archive.read("mean", stats.fit.mean);
        archive.read("covariance", stats.fit.covariance);
        archive.read("pr_features", stats.pr_features);
        archive.read("floor", floor);
        archive.read("count", count);
        stats.floor = floor.item<double>();
        stats.fit.count = count.item<std::int64_t>();
        *in.log << "  reference statistics: " << file.string() << " (cached)\n";
        return stats;
      } catch (const std::exception&) {
        *in.log << "  reference statistics cache " << file.string() << " is unreadable; recomputing\n";
      }
    }
    *in.log << "  Inception features of " << in.real_name << " " << in.reference_split << " (" << reference.count()
            << " images, once; cached in " << in.cache_dir.string() << ")\n" << std::flush;
    const at::Tensor features = evaluation::inception_features(*network_, reference.images, batch_size_).pool3;
    stats.fit = evaluation::fit_gaussian(features);
    stats.pr_features = features.narrow(0, 0, std::min(pr_samples_, features.size(0))).clone();
    stats.floor = floor(in, features);
    fs::create_directories(file.parent_path(), ec);
    torch::serialize::OutputArchive archive;
    archive.write("mean", stats.fit.mean);
    archive.write("covariance", stats.fit.covariance);
    archive.write("pr_features", stats.pr_features);
    archive.write("floor", at::scalar_tensor(stats.floor, at::kDouble));
    archive.write("count", at::scalar_tensor(stats.fit.count, at::kLong));
    std::ostringstream serialised;
    archive.save_to(serialised);
    write_file_atomically(file, serialised.str());
    return stats;
  }

  /// The logits the Inception Score is defined on: pool3 times the fc weights, without the fc bias,
  /// as the original code (Salimans et al. 2016, on the TF graph's "softmax/logits/MatMul") and
  /// torch-fidelity ("logits_unbiased") compute it.
  at::Tensor unbiased_logits(const at::Tensor& pool3) const {
    const auto parameters = network_->named_parameters();
    const at::Tensor* weight = parameters.find("fc.weight");
    if (!weight) throw std::logic_error("the Inception network has no fc.weight");
    return pool3.to(at::kDouble).matmul(weight->detach().to(at::kCPU, at::kDouble).t());
  }

  /// What real images score: the test split against a training reference, or the test split's
  /// two halves against each other.
  double floor(const EvaluationInput& in, const at::Tensor& reference_features) {
    if (in.reference_split != "test") {
      const at::Tensor test = evaluation::inception_features(*network_, in.real("test").images, batch_size_).pool3;
      return evaluation::frechet_distance(evaluation::fit_gaussian(test), evaluation::fit_gaussian(reference_features));
    }
    return evaluation::half_split_frechet_distance(reference_features);
  }

  fs::path weights_;
  evaluation::FidInceptionWeights loaded_;
  std::shared_ptr<evaluation::FidInceptionV3> network_;
  std::int64_t batch_size_, splits_, pr_samples_;
};

void register_components(Registrar* registrar) {
  registrar->add<InceptionEvaluator>(
      "inception",
      "Inception FID, Inception Score and precision/recall on Inception-V3 (pytorch-fid's network; weights supplied "
      "by the user)",
      Schema{}
          .add(Key::string("weights").defaults("")
                   .doc("pytorch-fid's pt_inception-2015-12-05-6726825d.pth converted by "
                        "scripts/convert_inception_weights.py (which checks its SHA-256); empty: "
                        "$PRIVDIFF_INCEPTION_WEIGHTS"))
          .add(Key::boolean("allow_unverified_weights").defaults(false)
                   .doc("for tests: accept weights that are not pytorch-fid's (another width, no conversion "
                        "record, another source); every metric is then named ..._not_comparable and the "
                        "provenance and caveats say not comparable with published FIDs"))
          .add(Key::integer("batch_size").at_least(1).defaults(50).doc("images per forward pass"))
          .add(Key::integer("is_splits").at_least(1).defaults(10).doc("Inception Score splits (the field: 10)"))
          .add(Key::integer("pr_samples").at_least(4).defaults(10000)
                   .doc("images per set for precision/recall (its cost is quadratic)")));
}

}  // namespace

}  // namespace privdiff::plugins::inception

PRIVDIFF_PLUGIN("inception", "0.1.0", "Inception-V3 metrics (FID, IS, precision/recall)",
                privdiff::plugins::inception::register_components)
