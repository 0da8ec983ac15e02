#include <privdiff/evaluation/public_classifier.hpp>

#include <privdiff/config/key_value_error.hpp>
#include <privdiff/evaluation/classifier_training.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace privdiff::sdk::evaluation {

Schema& add_public_classifier_keys(Schema& schema, const std::string& role) {
  return schema
      .add(Key::integer("classifier_depth").at_least(8).at_most(110).defaults(8)
               .doc(role + ": a ResNet of this depth (6n + 2), trained on the public data"))
      .add(Key::integer("classifier_epochs").at_least(1).defaults(3).doc("its epochs on the public data"))
      .add(Key::integer("classifier_batch_size").at_least(1).defaults(128).doc("its batch size"))
      .add(Key::number("classifier_lr").greater_than(0).defaults(1e-3).doc("its Adam learning rate"));
}

PublicClassifierOptions public_classifier_options(const Config& c) {
  const PublicClassifierOptions o{c.get_int("classifier_depth"), c.get_int("classifier_epochs"),
                                  c.get_int("classifier_batch_size"), c.get_double("classifier_lr")};
  if ((o.depth - 2) % 6 != 0) {
    throw KeyValueError(c.path() + ".classifier_depth", "a ResNet's depth is 6n + 2 (8, 14, 20, ...), got " +
                                std::to_string(o.depth));
  }
  return o;
}

PublicClassifier::PublicClassifier(const Dataset& public_data, const at::Tensor& public_labels,
                                   const PublicClassifierOptions& o, std::uint64_t seed, std::ostream& log,
                                   const std::string& who) {
  const at::Tensor order = at::randperm(public_data.size(), at::make_generator<at::CPUGeneratorImpl>(seed));
  const std::int64_t held = std::max<std::int64_t>(1, public_data.size() / 10);
  const at::Tensor x = public_data.images(order), y = public_labels.index({order});
  at::manual_seed(seed);
  net_ = make_benchmark_classifier(BenchmarkArchitecture{BenchmarkNetwork::resnet, o.depth}, x.size(1), x.size(2),
                                   public_data.num_classes());
  ClassifierSchedule schedule;
  schedule.epochs = o.epochs;
  schedule.batch_size = o.batch_size;
  schedule.lr = o.lr;
  log << who << ": training the public classifier (ResNet-" << o.depth << ", " << public_data.num_classes()
      << " public classes) on " << public_data.name() << "\n";
  const auto kept = train_selecting_epoch(*net_, x.slice(0, held), y.slice(0, held), x.slice(0, 0, held),
                                          y.slice(0, 0, held), schedule, at::kCPU, seed, log);
  validation_accuracy_ = kept.validation_accuracy;
  log << who << ": public validation accuracy " << validation_accuracy_ << "\n";
}

at::Tensor PublicClassifier::logits(const at::Tensor& images) const {
  torch::NoGradGuard no_grad;
  net_->eval();
  std::vector<at::Tensor> out;
  for (std::int64_t i = 0; i < images.size(0); i += 500) out.push_back(net_->forward(images.slice(0, i, i + 500)));
  return out.empty() ? at::empty({0, 0}, at::kDouble) : at::cat(out).to(at::kDouble);
}

}  // namespace privdiff::sdk::evaluation
