#include "evaluate/evaluation.hpp"

#include "evaluate/class_spread_subset.hpp"

#include "util/cache_directory.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/pixels.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

sdk::LabelledImages read_labelled_images(const fs::path& images_file, const fs::path& labels_file,
                                         std::int64_t classes) {
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
  sdk::LabelledImages out;
  out.images = sdk::pixels_from_bytes(at::from_blob(const_cast<std::uint8_t*>(images.data.data()), shape, at::kByte));
  out.labels = at::from_blob(const_cast<std::uint8_t*>(labels.data.data()), {labels.shape[0]}, at::kByte).to(at::kLong);
  return out;
}

DataSection split_section(const DataSection& real, const std::string& split) {
  std::map<std::string, sdk::ConfigValue> values = real.dataset.config.values();
  values["split"] = sdk::ConfigValue{split};
  DataSection section = real;
  section.dataset.config = sdk::Config(real.dataset.config.path(), values);
  return section;
}

const std::string& train_reference_caveat() {
  static const std::string text =
      "scored against the training split (reference = train): feature statistics, Fréchet distances and "
      "precision/recall are non-private statistics of that split; do not publish them if a private model "
      "trained on it";
  return text;
}

namespace {

/// The real data's splits, each opened through its dataset plugin on first use.
class RealSplits {
 public:
  using Check = std::function<void(const std::string& split, const sdk::Dataset& data)>;
  RealSplits(const DataSection& section, const RealDataOpener& open, Check check)
      : section_(section), open_(open), check_(std::move(check)) {
    if (!section.dataset.config.has("split")) {
      throw std::invalid_argument("real data (" + section.path + "): the dataset '" + section.dataset.id +
                                  "' has no `split` key; evaluation needs the real data's held-out test split "
                                  "(datasets with splits: idx, fashion-mnist, mnist, cifar10, celeba)");
    }
  }

  const sdk::LabelledImages& split(const std::string& name) {
    auto& slot = splits_[name];
    if (slot.images.defined()) return slot;
    std::unique_ptr<sdk::Dataset> data;
    try {
      data = open_(split_section(section_, name));
    } catch (const std::exception& e) {
      std::string why = e.what();
      if (section_.dataset.id == "fashion-mnist" && why.find("not a directory") != std::string::npos &&
          why.find("install Debian") == std::string::npos) {
        why += " (install Debian's dataset-fashion-mnist, or give --real-path DIR)";
      }
      throw std::invalid_argument("real data (" + section_.dataset.id + ", " + name + " split): " + why);
    }
    if (check_) check_(name, *data);
    const at::Tensor all = at::arange(data->size(), at::kLong);
    slot = {data->images(all), data->labels(all)};
    classes_ = data->num_classes();
    if (name_.empty()) {  // "fashion-mnist (train)" -> "fashion-mnist"
      name_ = data->name();
      if (const auto paren = name_.rfind(" ("); paren != std::string::npos) name_.resize(paren);
    }
    return slot;
  }
  std::int64_t classes() const { return classes_; }
  const std::string& name() const { return name_; }
  bool opened(const std::string& split) const { return splits_.count(split) && splits_.at(split).images.defined(); }

 private:
  const DataSection& section_;
  const RealDataOpener& open_;
  Check check_;
  std::map<std::string, sdk::LabelledImages> splits_;
  std::int64_t classes_ = 0;
  std::string name_;
};

/// The set's images and labels must be the real data's kind: same image shape, labels its classes.
void check_comparable(const sdk::LabelledImages& set, const sdk::LabelledImages& test, std::int64_t classes,
                      const std::string& real) {
  if (set.images.sizes().slice(1) != test.images.sizes().slice(1)) {
    throw std::invalid_argument("the images are " + std::to_string(set.images.size(2)) + "x" +
                                std::to_string(set.images.size(3)) + " with " + std::to_string(set.images.size(1)) +
                                " channel(s); " + real + " images are " + std::to_string(test.images.size(2)) + "x" +
                                std::to_string(test.images.size(3)) + " with " + std::to_string(test.images.size(1)));
  }
  if (set.count() > 0 && set.labels.max().item<std::int64_t>() >= classes) {
    const std::int64_t at = set.labels.ge(classes).nonzero().flatten()[0].item<std::int64_t>();
    throw std::invalid_argument("label " + std::to_string(set.labels[at].item<std::int64_t>()) + " at index " +
                                std::to_string(at) + " is not a class of " + real + " (0.." +
                                std::to_string(classes - 1) + "); are these labels for another dataset?");
  }
}

nlohmann::json to_json(const sdk::EvaluationResult& r, double seconds) {
  nlohmann::json metrics = nlohmann::json::object(), details = nlohmann::json::object();
  for (const auto& [name, value] : r.metrics) metrics[name] = value;
  for (const auto& [name, value] : r.details) details[name] = value;
  return {{"metrics", metrics}, {"provenance", r.provenance}, {"counts", r.counts},
          {"caveats", r.caveats}, {"details", details}, {"seconds", seconds}};
}

}  // namespace

std::vector<NamedEvaluator> create_evaluators(const std::vector<ComponentSection>& sections,
                                              const ComponentRegistry& registry) {
  std::vector<NamedEvaluator> out;
  for (const auto& section : sections) {
    out.push_back({section.id, create_component<sdk::Evaluator>(registry, section.id, section.config)});
  }
  return out;
}

nlohmann::json evaluate_image_set(const sdk::LabelledImages& full, const EvaluationPlan& plan,
                                  const std::vector<NamedEvaluator>& evaluators, const RealDataOpener& open,
                                  std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  if (plan.reference != "test" && plan.reference != "train") {
    throw std::invalid_argument("reference: expected \"test\" or \"train\", got \"" + plan.reference + "\"");
  }
  // Before the real data are opened (and the samples checked against them for near-copies, which takes
  // minutes): the sample set's own classes already say whether --max-samples can be right.
  if (plan.max_samples > 0 && full.labels.defined()) {
    const std::int64_t present = (at::bincount(full.labels.flatten().to(at::kLong)) > 0).sum().item<std::int64_t>();
    if (plan.max_samples < present) {
      throw std::invalid_argument("--max-samples " + std::to_string(plan.max_samples) + " is below the " +
                                  std::to_string(present) + " classes of the sample set: a classifier trained on fewer "
                                  "images than classes scores nothing (give at least " + std::to_string(present) + ")");
    }
  }
  RealSplits real(plan.real, open, plan.check_split);
  const sdk::LabelledImages& test = real.split("test");
  sdk::LabelledImages set = full;
  if (plan.max_samples > 0 && plan.max_samples < real.classes()) {
    throw std::invalid_argument("--max-samples " + std::to_string(plan.max_samples) + " is below the " +
                                std::to_string(real.classes()) + " classes of " + real.name() + ": a classifier "
                                "trained on fewer images than classes scores nothing (give at least " +
                                std::to_string(real.classes()) + ")");
  }
  if (plan.max_samples > 0) set = class_spread_subset(set, plan.max_samples);
  check_comparable(set, test, real.classes(), real.name());

  sdk::EvaluationInput input;
  input.samples = set;
  input.real = [&real](const std::string& split) -> const sdk::LabelledImages& { return real.split(split); };
  input.real_name = real.name();
  input.reference_split = plan.reference;
  input.num_classes = real.classes();
  input.seed = plan.seed;
  input.device = plan.device;
  input.cache_dir = cache_directory(plan.cache_dir);
  // Owner-only: with a training-split reference the cached feature networks and statistics are
  // derived from private records (docs/privacy.md#what-a-run-directory-reveals).
  std::error_code ec;
  fs::create_directories(input.cache_dir, ec);
  fs::permissions(input.cache_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  input.log = &log;

  nlohmann::json result;
  result["real"] = real.name();
  result["reference"] = plan.reference;
  result["caveats"] = nlohmann::json::array();
  if (plan.reference == "train") result["caveats"].push_back(train_reference_caveat());
  result["evaluators"] = nlohmann::json::object();
  for (const auto& [id, evaluator] : evaluators) {
    log << "evaluator " << id << ": scoring " << set.count() << " images against " << real.name() << "\n"
        << std::flush;
    const auto evaluator_start = std::chrono::steady_clock::now();
    const sdk::EvaluationResult r = evaluator->evaluate(input);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - evaluator_start).count();
    result["evaluators"][id] = to_json(r, seconds);
    for (const auto& caveat : r.caveats) result["caveats"].push_back(id + ": " + caveat);
    log << "evaluator " << id << ":";
    for (const auto& [name, value] : r.metrics) log << " " << name << " " << value;
    log << " (" << static_cast<std::int64_t>(seconds) << " s)\n";
  }
  result["counts"] = {{"samples", set.count()}, {"real_test", test.count()}};
  if (real.opened("train")) result["counts"]["real_train"] = real.split("train").count();
  result["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace privdiff::core
