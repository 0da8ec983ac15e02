// benchmark_classifiers: DPImageBench's downstream protocol (evaluation/evaluator.py and
// evaluation/classifier/ of its code; sdk/evaluation/benchmark_classifiers.hpp). ResNet, WRN and
// ResNeXt — the sizes and schedules the benchmark picks by dataset (CIFAR or not) — are trained on
// the synthetic set, each keeps the epoch with the best validation accuracy (EMA weights, as
// there), each is tested on the real test split, and the mean is reported beside them.
//
// The validation set is a held-out part of the *synthetic* set by default (the benchmark's
// eval.mode = syn: 5,000 of 60,000, 1/12), so no private record is touched. DPImageBench's default
// (eval.mode = val) selects on real training images instead: selection = "real" does that, and the
// result then says the choice of epoch is a non-private statistic of private data.
#include <privdiff/evaluation/benchmark_classifiers.hpp>
#include <privdiff/evaluation/downstream_accuracy.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>

#include <numeric>
#include <sstream>

namespace privdiff::plugins::benchmark_classifiers {

using namespace privdiff::sdk;

namespace {

class BenchmarkClassifiersEvaluator : public Evaluator {
 public:
  explicit BenchmarkClassifiersEvaluator(const Config& c)
      : selection_(c.get_string("selection")), validation_share_(c.get_double("validation_share")) {
    if (c.has("networks")) {
      for (const auto& name : c.get_string_list("networks")) networks_.push_back(evaluation::benchmark_network_from_string(name));
    }
    if (c.has("epochs")) epochs_ = c.get_int("epochs");
    if (c.has("batch_size")) batch_size_ = c.get_int("batch_size");
  }

  /// With `networks` set; otherwise they follow the image size (DPImageBench's choice), known only then.
  std::vector<std::string> metric_names() const override {
    if (networks_.empty()) return {};
    std::vector<std::string> names;
    for (const auto network : networks_) names.push_back("accuracy." + evaluation::to_string(network));
    names.push_back("accuracy.mean");
    return names;
  }

  EvaluationResult evaluate(const EvaluationInput& in) override {
    const LabelledImages& test = in.real("test");
    const std::int64_t channels = in.samples.images.size(1), size = in.samples.images.size(2);
    const auto regime = evaluation::benchmark_regime_for_dataset(in.real_name);
    evaluation::ClassifierSchedule schedule = evaluation::dpimagebench_schedule(regime, size);
    const auto networks = networks_.empty() ? evaluation::dpimagebench_networks(size) : networks_;
    if (epochs_ > 0) schedule.epochs = epochs_;
    if (batch_size_ > 0) {  // the benchmark's micro-batches must divide the batch: keep as many as do
      schedule.batch_size = batch_size_;
      schedule.micro_batches = std::gcd(schedule.micro_batches, batch_size_);
    }
    const auto [split, caveat] = training_and_validation(in);
    EvaluationResult result;
    double sum = 0;
    std::string names;
    for (const auto network : networks) {
      const std::string name = evaluation::to_string(network);
      const auto architecture = evaluation::dpimagebench_architecture(network, regime);
      names += (names.empty() ? "" : ", ") + evaluation::describe(architecture);
      *in.log << "  training " << name << " on " << split.train.count() << " images (" << schedule.epochs << " epochs, "
              << (schedule.optimizer == evaluation::ClassifierSchedule::Optimizer::sgd ? "SGD" : "Adam") << " "
              << schedule.lr << ", batch " << schedule.batch_size << ")\n" << std::flush;
      at::manual_seed(in.seed);  // the same data and seed give the same classifier
      auto net = evaluation::make_benchmark_classifier(architecture, channels, size, in.num_classes);
      sum += evaluation::train_and_score(name, *net, split, test, schedule, in, result);
    }
    result.metrics.emplace_back("accuracy.mean", sum / static_cast<double>(networks.size()));
    result.provenance = "DPImageBench's classifiers (" + evaluation::to_string(regime) + " settings: " + names + "), " +
                        std::to_string(schedule.epochs) + " epochs, " +
                        (schedule.optimizer == evaluation::ClassifierSchedule::Optimizer::sgd ? "SGD " : "Adam ") +
                        number(schedule.lr) + ", batch " + std::to_string(schedule.batch_size) + ", epoch selected on " +
                        std::to_string(split.validation.count()) + (selection_ == "real" ? " real training" : " synthetic") +
                        " images; accuracy on the real test split";
    result.counts = {{"train", split.train.count()}, {"validation", split.validation.count()}, {"real_test", test.count()}};
    if (!caveat.empty()) result.caveats.push_back(caveat);
    return result;
  }

 private:
  struct Split {
    evaluation::TrainValidation split;
    std::string caveat;
  };

  Split training_and_validation(const EvaluationInput& in) const {
    const std::int64_t n = in.samples.count();
    if (selection_ == "synthetic") {
      const auto split = evaluation::split_for_validation(
          in.samples, static_cast<std::int64_t>(static_cast<double>(n) * validation_share_), in.seed);
      return {split, ""};
    }
    const LabelledImages& real_train = in.real("train");
    const auto split = evaluation::split_for_validation(
        real_train, static_cast<std::int64_t>(static_cast<double>(real_train.count()) * validation_share_), in.seed);
    return {{in.samples, split.validation},
            "the epochs were selected on " + std::to_string(split.validation.count()) + " images of " + in.real_name +
                "'s training split (selection = \"real\"): a non-private choice made on private data, so the "
                "accuracies are no DP release; use selection = \"synthetic\" for one"};
  }

  static std::string number(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  }

  std::vector<evaluation::BenchmarkNetwork> networks_;
  std::string selection_;
  double validation_share_;
  std::int64_t epochs_ = 0, batch_size_ = 0;
};

void register_components(Registrar* registrar) {
  registrar->add<BenchmarkClassifiersEvaluator>(
      "benchmark_classifiers",
      "DPImageBench's accuracy: ResNet, WRN and ResNeXt trained on the samples with the benchmark's schedules, "
      "tested on the real test split, and their mean",
      Schema{}
          .add(Key::string_list("networks").one_of({"resnet", "wrn", "resnext"}).optional()
                   .doc("which classifiers (the mean is over these); default: the benchmark's (all three up to "
                        "32 x 32, ResNet and WRN above)"))
          .add(Key::integer("epochs").at_least(1).optional()
                   .doc("default: the benchmark's (CIFAR 200, other data 50); fewer for a scaled-down CPU run"))
          .add(Key::integer("batch_size").at_least(1).optional().doc("default: the benchmark's (CIFAR 126, other data 256)"))
          .add(Key::string("selection").one_of({"synthetic", "real"}).defaults("synthetic")
                   .doc("where the epoch is selected: synthetic = a held-out share of the samples (no private data); "
                        "real = of the real training split (a caveat: not a DP release)"))
          .add(Key::number("validation_share").greater_than(0).less_than(1).defaults(1.0 / 12)
                   .doc("share held out for selection (the benchmark: 5,000 of 60,000)")));
}

}  // namespace

}  // namespace privdiff::plugins::benchmark_classifiers

PRIVDIFF_PLUGIN("benchmark_classifiers", "0.1.0", "DPImageBench's classifier protocol",
                privdiff::plugins::benchmark_classifiers::register_components)
