#include <privdiff/evaluation/downstream_accuracy.hpp>

#include <iomanip>

namespace privdiff::sdk::evaluation {

double train_and_score(const std::string& name, ImageClassifier& net, const TrainValidation& split,
                       const LabelledImages& test, const ClassifierSchedule& schedule, const EvaluationInput& in,
                       EvaluationResult& result) {
  const SelectedEpoch selected = train_selecting_epoch(net, split.train.images, split.train.labels,
                                                       split.validation.images, split.validation.labels, schedule,
                                                       in.device, in.seed, *in.log);
  const double accuracy = classifier_accuracy(net, test.images, test.labels);
  result.metrics.emplace_back("accuracy." + name, accuracy);
  result.details.emplace_back("validation_accuracy." + name, selected.validation_accuracy);
  result.details.emplace_back("best_epoch." + name, static_cast<double>(selected.best_epoch));
  *in.log << "  " << name << ": accuracy on " << in.real_name << " test " << std::setprecision(4) << accuracy << "\n";
  return accuracy;
}

}  // namespace privdiff::sdk::evaluation
