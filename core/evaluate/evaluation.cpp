#include "evaluate/evaluation.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>
#include <privdiff/data/pixels.hpp>
#include "evaluate/feature_statistics.hpp"
#include "recipe/core_schemas.hpp"
#include "util/atomic_file.hpp"
#include "util/content_hash.hpp"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

LabelledImages read_labelled_images(const fs::path& images_file, const fs::path& labels_file, std::int64_t classes) {
  const sdk::IdxArray images = sdk::read_idx(images_file);
  const sdk::IdxArray labels = sdk::read_idx(labels_file);
  if (images.shape.size() != 3 && images.shape.size() != 4) {
    throw std::runtime_error(images_file.string() + ": expected images [N, H, W] or [N, C, H, W], got rank " +
                             std::to_string(images.shape.size()));
  }
  if (labels.shape.size() != 1) {
    throw std::runtime_error(labels_file.string() + ": expected a label vector [N], got rank " +
                             std::to_string(labels.shape.size()));
  }
  if (labels.shape[0] != images.shape[0]) {
    throw std::runtime_error(labels_file.string() + " has " + std::to_string(labels.shape[0]) + " labels for the " +
                             std::to_string(images.shape[0]) + " images of " + images_file.string());
  }
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= classes) {
      throw std::runtime_error(labels_file.string() + ": label " + std::to_string(labels.data[i]) + " at index " +
                               std::to_string(i) + " is not a class (0.." + std::to_string(classes - 1) + ")");
    }
  }
  std::vector<std::int64_t> shape = images.shape;
  if (shape.size() == 3) shape.insert(shape.begin() + 1, 1);
  LabelledImages out;
  out.images = sdk::pixels_from_bytes(at::from_blob(const_cast<std::uint8_t*>(images.data.data()), shape, at::kByte));
  out.labels = at::from_blob(const_cast<std::uint8_t*>(labels.data.data()), {labels.shape[0]}, at::kByte).to(at::kLong);
  return out;
}

namespace {

struct RealData {
  LabelledImages train, test;  ///< train is only read when it is the reference
  std::string reference_split;
  const LabelledImages& reference() const { return reference_split == "train" ? train : test; }
  std::int64_t classes = 0;
  std::string name;
};

LabelledImages all_of(const sdk::Dataset& data) {
  const at::Tensor all = at::arange(data.size(), at::kLong);
  return {data.images(all), data.labels(all)};
}

RealData open_real(const EvalOptions& options) {
  if (options.reference != "test" && options.reference != "train") {
    throw std::invalid_argument("reference: expected \"test\" or \"train\", got \"" + options.reference + "\"");
  }
  RealData real;
  real.reference_split = options.reference;
  for (const std::string split : {"test", "train"}) {
    if (split == "train" && options.reference != "train") break;  // never read unless asked for
    const std::filesystem::path dir =
        options.real_path.empty() ? sdk::system_idx_directory(options.real_dataset) : fs::path(options.real_path);
    std::unique_ptr<sdk::Dataset> data;
    try {
      if (dir.empty()) {
        throw std::runtime_error("unknown dataset '" + options.real_dataset +
                                 "' (known: fashion-mnist, mnist; or give --real-path DIR)");
      }
      data = std::make_unique<sdk::ImageDataset>(sdk::read_idx_split(dir, split), false,
                                                 (options.real_dataset.empty() ? dir.filename().string()
                                                                               : options.real_dataset) +
                                                     " (" + split + ")");
    } catch (const std::runtime_error& e) {  // say it in the command's terms
      std::string why = e.what();
      if (options.real_path.empty() && options.real_dataset == "fashion-mnist" &&
          why.find("not a directory") != std::string::npos) {
        why += " (install Debian's dataset-fashion-mnist, or give --real-path DIR)";
      }
      throw std::invalid_argument("real data (" +
                                  (options.real_path.empty() ? "--real " + options.real_dataset
                                                             : "--real-path " + options.real_path) +
                                  ", " + split + " split): " + why);
    }
    (split == "train" ? real.train : real.test) = all_of(*data);
    real.classes = data->num_classes();
    if (real.name.empty()) {  // "fashion-mnist (train)" -> "fashion-mnist"
      real.name = data->name();
      if (const auto paren = real.name.rfind(" ("); paren != std::string::npos) real.name.resize(paren);
    }
  }
  return real;
}

fs::path cache_directory(const EvalOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char* dir = std::getenv("PRIVDIFF_CACHE_DIR"); dir && *dir) return dir;
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return fs::path(dir) / "privdiff";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "privdiff";
  return fs::temp_directory_path() / "privdiff-cache";
}

/// The feature CNN, trained on the reference split once per (data, recipe of training) and cached.
std::shared_ptr<ClassifierNet> feature_network(const RealData& real, const EvalOptions& options, std::ostream& log,
                                               std::string& description) {
  ClassifierTraining training;
  training.epochs = options.feature_epochs;
  training.seed = 20240101;  // fixed: every evaluation uses the same feature network
  const LabelledImages& reference = real.reference();
  const at::Tensor bytes = sdk::pixels_to_bytes(reference.images).contiguous();
  const std::string data(reinterpret_cast<const char*>(bytes.data_ptr<std::uint8_t>()), static_cast<std::size_t>(bytes.numel()));
  const at::Tensor labels = reference.labels.to(at::kByte).contiguous();
  const std::string key = content_hash(data + std::string(reinterpret_cast<const char*>(labels.data_ptr<std::uint8_t>()),
                                                          static_cast<std::size_t>(labels.numel())) +
                                       "|feature-cnn-v1|epochs=" + std::to_string(training.epochs) +
                                       "|seed=" + std::to_string(training.seed));
  const fs::path file = cache_directory(options) / ("feature-cnn-" + key + ".pt");
  description = "penultimate 128-d features of the DP-Sinkhorn CNN trained " + std::to_string(training.epochs) +
                " epochs on " + real.name + " " + real.reference_split + " (seed " + std::to_string(training.seed) + "; cache " +
                file.filename().string() + "); not Inception, so not comparable with published FID";
  auto net = std::make_shared<ClassifierNet>(ClassifierKind::cnn, real.classes, reference.images.size(1),
                                             reference.images.size(2));
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) {
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(file.string());
      net->load(archive);
      net->to(options.device);
      log << "feature network: " << file.string() << " (cached)\n";
      return net;
    } catch (const std::exception&) {
      log << "feature network cache " << file.string() << " is unreadable; retraining\n";
    }
  }
  log << "feature network: training the CNN on " << real.name << " " << real.reference_split << " (" << training.epochs
      << " epochs, once; cached in " << file.parent_path().string() << ")\n" << std::flush;
  training.device = options.device;
  TrainedClassifier trained = train_classifier(ClassifierKind::cnn, reference.images, reference.labels,
                                               real.classes, training, log);
  fs::create_directories(file.parent_path(), ec);
  torch::serialize::OutputArchive archive;
  trained.net->save(archive);
  std::ostringstream serialised;
  archive.save_to(serialised);
  write_file_atomically(file, serialised.str());
  return trained.net;
}

}  // namespace

const std::string& train_reference_caveat() {
  static const std::string text =
      "scored against the training split (reference = train): the feature network, Fréchet distance and "
      "precision/recall are non-private statistics of that split; do not publish them if a private model "
      "trained on it";
  return text;
}

nlohmann::json evaluate_image_set(const LabelledImages& full, const EvalOptions& options, std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  RealData real = open_real(options);
  LabelledImages set = full;
  if (set.images.size(0) > options.max_samples) {
    set.images = set.images.narrow(0, 0, options.max_samples);
    set.labels = set.labels.narrow(0, 0, options.max_samples);
  }
  if (set.images.sizes().slice(1) != real.test.images.sizes().slice(1)) {
    throw std::invalid_argument("the images are " + std::to_string(set.images.size(2)) + "x" +
                             std::to_string(set.images.size(3)) + " with " + std::to_string(set.images.size(1)) +
                             " channel(s); " + real.name + " images are " + std::to_string(real.test.images.size(2)) +
                             "x" + std::to_string(real.test.images.size(3)));
  }
  const std::int64_t n = set.images.size(0);
  if (n > 0) {
    const std::int64_t largest = set.labels.max().item<std::int64_t>();
    if (largest >= real.classes) {
      const std::int64_t at = set.labels.ge(real.classes).nonzero().flatten()[0].item<std::int64_t>();
      throw std::invalid_argument("label " + std::to_string(set.labels[at].item<std::int64_t>()) + " at index " +
                               std::to_string(at) + " is not a class of " + real.name + " (0.." +
                               std::to_string(real.classes - 1) + "); are these labels for another dataset?");
    }
  }
  nlohmann::json result;
  result["counts"] = {{"samples", n}, {"real_test", real.test.images.size(0)}};
  if (real.train.images.defined()) result["counts"]["real_train"] = real.train.images.size(0);
  result["real"] = real.name;
  result["reference"] = real.reference_split;
  result["caveats"] = nlohmann::json::array();
  if (real.reference_split == "train") result["caveats"].push_back(train_reference_caveat());

  // Downstream accuracy: trained on the set, selected on its own validation split, tested on real test.
  nlohmann::json accuracy = nlohmann::json::object(), validation = nlohmann::json::object();
  for (const ClassifierKind kind : options.classifiers) {
    ClassifierTraining training;
    training.epochs = options.epochs;
    training.seed = options.seed;
    training.device = options.device;
    log << "training " << to_string(kind) << " on " << n << " images (" << options.epochs << " epochs)\n" << std::flush;
    TrainedClassifier trained = train_classifier(kind, set.images, set.labels, real.classes, training, log);
    const double test_accuracy = classifier_accuracy(*trained.net, real.test.images, real.test.labels);
    accuracy[to_string(kind)] = test_accuracy;
    validation[to_string(kind)] = trained.validation_accuracy;
    result["counts"]["classifier_train"] = trained.train_count;
    result["counts"]["classifier_validation"] = trained.validation_count;
    log << "  " << to_string(kind) << ": accuracy on " << real.name << " test " << std::setprecision(4) << test_accuracy
        << "\n";
  }
  result["accuracy"] = accuracy;
  result["validation_accuracy"] = validation;
  result["epochs"] = options.epochs;

  // Fidelity on the feature CNN's features.
  std::string description;
  auto features_net = feature_network(real, options, log, description);
  const at::Tensor reference_features = classifier_features(*features_net, real.reference().images);
  const at::Tensor set_features = classifier_features(*features_net, set.images);
  const GaussianFit reference_fit = fit_gaussian(reference_features);
  result["frechet_distance"] = frechet_distance(fit_gaussian(set_features), reference_fit);
  if (real.reference_split == "train") {  // the floor: real held-out images against the reference
    result["frechet_floor"] =
        frechet_distance(fit_gaussian(classifier_features(*features_net, real.test.images)), reference_fit);
  } else {  // the test split is the reference: its two halves against each other
    const std::int64_t m = reference_features.size(0);
    const at::Tensor even = reference_features.index_select(0, at::arange(0, m, 2, at::kLong));
    const at::Tensor odd = reference_features.index_select(0, at::arange(1, m, 2, at::kLong));
    result["frechet_floor"] = frechet_distance(fit_gaussian(even), fit_gaussian(odd));
  }
  const std::int64_t pr_real = std::min(options.pr_samples, reference_features.size(0));
  const std::int64_t pr_set = std::min(options.pr_samples, set_features.size(0));
  const PrecisionRecall pr = precision_recall(reference_features.narrow(0, 0, pr_real), set_features.narrow(0, 0, pr_set));
  result["precision"] = pr.precision;
  result["recall"] = pr.recall;
  result["counts"]["frechet_samples"] = n;
  result["counts"]["frechet_reference"] = reference_features.size(0);
  result["counts"]["pr_samples"] = pr_set;
  result["counts"]["pr_reference"] = pr_real;
  result["features"] = description;
  result["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log << "Fréchet distance " << std::setprecision(4) << result["frechet_distance"].get<double>() << " (floor, " << (real.reference_split == "train" ? "real test vs train" : "test halves") << ": "
      << result["frechet_floor"].get<double>() << "), precision " << pr.precision << ", recall " << pr.recall << "\n";
  return result;
}

}  // namespace privdiff::core
