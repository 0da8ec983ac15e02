// dpdm_classifiers: DPDM's downstream accuracy. Each classifier is trained on the set (its epoch
// selected on a held-out 10% of the *synthetic* set) and tested on the real test split, which is
// only ever scored, never selected on.
#include "dpdm_classifier_nets.hpp"
#include "dpdm_evaluators.hpp"

#include <privdiff/evaluation/downstream_accuracy.hpp>

#include <ATen/ATen.h>

namespace privdiff::plugins::dpdm_evaluation {

using namespace privdiff::sdk;

namespace {

class DpdmClassifiersEvaluator : public Evaluator {
 public:
  explicit DpdmClassifiersEvaluator(const Config& c)
      : epochs_(c.get_int("epochs")), validation_fraction_(c.get_double("validation_fraction")) {
    for (const auto& name : c.get_string_list("classifiers")) kinds_.push_back(dpdm_classifier_from_string(name));
  }

  std::vector<std::string> metric_names() const override {
    std::vector<std::string> names;
    for (const DpdmClassifier kind : kinds_) names.push_back("accuracy." + to_string(kind));
    return names;
  }

  EvaluationResult evaluate(const EvaluationInput& in) override {
    const LabelledImages& test = in.real("test");
    const auto split = evaluation::split_for_validation(
        in.samples, static_cast<std::int64_t>(static_cast<double>(in.samples.count()) * validation_fraction_), in.seed);
    EvaluationResult result;
    for (const DpdmClassifier kind : kinds_) {
      *in.log << "  training " << to_string(kind) << " on " << split.train.count() << " images (" << epochs_
              << " epochs)\n" << std::flush;
      at::manual_seed(in.seed);  // the same data and seed give the same classifier
      DpdmClassifierNet net(kind, in.num_classes, in.samples.images.size(1), in.samples.images.size(2));
      evaluation::train_and_score(to_string(kind), net, split, test, dpdm_schedule(epochs_), in, result);
    }
    result.provenance = "DPDM's classifiers (DP-Sinkhorn code), Adam 3e-4, batch 128, " + std::to_string(epochs_) +
                        " epochs, epoch selected on " + std::to_string(split.validation.count()) +
                        " held-out synthetic images; accuracy on the real test split";
    result.counts = {{"train", split.train.count()}, {"validation", split.validation.count()}, {"real_test", test.count()}};
    return result;
  }

 private:
  std::vector<DpdmClassifier> kinds_;
  std::int64_t epochs_;
  double validation_fraction_;
};

}  // namespace

void register_dpdm_classifiers(Registrar* registrar) {
  registrar->add<DpdmClassifiersEvaluator>(
      "dpdm_classifiers",
      "accuracy on the real test split of DPDM's logreg, MLP and CNN trained on the samples (epoch selected on "
      "a synthetic validation split)",
      Schema{}
          .add(Key::string_list("classifiers").one_of({"logreg", "mlp", "cnn"})
                   .defaults(ConfigValue{std::vector<std::string>{"logreg", "mlp", "cnn"}})
                   .doc("which classifiers: logreg, mlp, cnn"))
          .add(Key::integer("epochs").at_least(1).defaults(50).doc("epochs per classifier (DPDM: 50)"))
          .add(Key::number("validation_fraction").greater_than(0).less_than(1).defaults(0.1)
                   .doc("share of the samples held out to select the epoch on")));
}

}  // namespace privdiff::plugins::dpdm_evaluation
