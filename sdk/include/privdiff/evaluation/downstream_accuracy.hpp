#pragma once
/// @file
/// The step every downstream-classifier evaluator repeats per network: train it on the synthetic
/// split with its epoch selected on the validation split, then score it on the real test images,
/// and record both in the evaluator's result under the network's name.

#include <privdiff/components/evaluator.hpp>
#include <privdiff/evaluation/classifier_training.hpp>
#include <privdiff/evaluation/validation_split.hpp>
#include <privdiff/sdk_api.hpp>

#include <string>

namespace privdiff::sdk::evaluation {

/// Trains `net` with train_selecting_epoch on split.train / split.validation (in.device, in.seed,
/// logging to in.log), tests it on `test`, and adds to `result` the metric "accuracy.NAME" and the
/// details "validation_accuracy.NAME" and "best_epoch.NAME". Returns the test accuracy.
PRIVDIFF_SDK_API double train_and_score(const std::string& name, ImageClassifier& net, const TrainValidation& split,
                                        const LabelledImages& test, const ClassifierSchedule& schedule,
                                        const EvaluationInput& in, EvaluationResult& result);

}  // namespace privdiff::sdk::evaluation
