#include <privdiff/evaluation/classifier_training.hpp>

#include <privdiff/engine/device.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk::evaluation {

namespace {

void check_schedule(const ClassifierSchedule& s) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("classifier schedule: " + what); };
  if (s.epochs < 1) fail("epochs must be at least 1, got " + std::to_string(s.epochs));
  if (s.batch_size < 1) fail("batch_size must be at least 1, got " + std::to_string(s.batch_size));
  if (!(s.lr > 0)) fail("lr must be positive, got " + std::to_string(s.lr));
  if (s.momentum < 0 || s.weight_decay < 0) fail("momentum and weight_decay must be non-negative");
  if (s.lr_step_epochs < 0) fail("lr_step_epochs must be 0 (constant) or positive");
  if (!(s.lr_step_gamma > 0)) fail("lr_step_gamma must be positive, got " + std::to_string(s.lr_step_gamma));
  if (s.ema_decay < 0 || s.ema_decay >= 1) fail("ema_decay must be in [0, 1), got " + std::to_string(s.ema_decay));
  if (s.micro_batches < 1 || s.batch_size % s.micro_batches != 0) {
    fail("micro_batches must divide batch_size (" + std::to_string(s.batch_size) + "), got " +
         std::to_string(s.micro_batches));
  }
}

void check_labelled(const at::Tensor& images, const at::Tensor& labels, const std::string& what) {
  if (images.dim() != 4 || !images.is_floating_point()) {
    throw std::invalid_argument(what + " images must be float [N, C, H, W], got " + std::to_string(images.dim()) +
                                " dimensions of " + std::string(c10::toString(images.scalar_type())));
  }
  if (images.size(0) == 0) throw std::invalid_argument(what + ": no images");
  if (labels.dim() != 1 || labels.size(0) != images.size(0) || labels.scalar_type() != at::kLong) {
    throw std::invalid_argument(what + " labels must be int64 [" + std::to_string(images.size(0)) +
                                "], one per image");
  }
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(ImageClassifier& net, const ClassifierSchedule& s) {
  if (s.optimizer == ClassifierSchedule::Optimizer::sgd) {
    return std::make_unique<torch::optim::SGD>(
        net.parameters(), torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay));
  }
  return std::make_unique<torch::optim::Adam>(net.parameters(),
                                              torch::optim::AdamOptions(s.lr).weight_decay(s.weight_decay));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, const ClassifierSchedule& s, double lr) {
  for (auto& group : optimizer.param_groups()) {
    if (s.optimizer == ClassifierSchedule::Optimizer::sgd) {
      static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
    } else {
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    }
  }
}

/// Copies of a net's parameters and buffers: the kept epoch (BatchNorm's running statistics are
/// part of what was validated, so they are kept with the weights).
struct NetState {
  std::vector<at::Tensor> parameters, buffers;

  static NetState of(ImageClassifier& net) {
    NetState state;
    for (const auto& p : net.parameters()) state.parameters.push_back(p.detach().clone());
    for (const auto& b : net.buffers()) state.buffers.push_back(b.detach().clone());
    return state;
  }
  void load_into(ImageClassifier& net) const {
    torch::NoGradGuard no_grad;
    auto params = net.parameters();
    auto bufs = net.buffers();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(parameters[i]);
    for (std::size_t i = 0; i < bufs.size(); ++i) bufs[i].copy_(buffers[i]);
  }
};

/// DPImageBench's evaluation/ema.py: a moving average of the parameters with a warm-up decay.
class ParameterAverage {
 public:
  ParameterAverage(ImageClassifier& net, double decay) : decay_(decay) {
    for (const auto& p : net.parameters()) average_.push_back(p.detach().clone());
  }
  void update(ImageClassifier& net) {
    ++updates_;
    const double d = std::min(decay_, (1.0 + static_cast<double>(updates_)) / (10.0 + static_cast<double>(updates_)));
    torch::NoGradGuard no_grad;
    auto params = net.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) average_[i].sub_((1.0 - d) * (average_[i] - params[i]));
  }
  /// Swaps the average and the live parameters (twice: back to where it was).
  void swap_with(ImageClassifier& net) {
    torch::NoGradGuard no_grad;
    auto params = net.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      at::Tensor live = params[i].detach().clone();
      params[i].copy_(average_[i]);
      average_[i] = live;
    }
  }

 private:
  double decay_;
  std::int64_t updates_ = 0;
  std::vector<at::Tensor> average_;
};

struct EpochTotals {
  double loss_sum = 0;  ///< of the per-part mean losses times the part's size
  std::int64_t correct = 0, seen = 0;
};

/// What runs across epochs: the optimizer, the moving average and the parts not yet stepped on.
struct TrainingState {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<ParameterAverage> average;
  std::int64_t pending_parts = 0;
};

EpochTotals train_one_epoch(ImageClassifier& net, const at::Tensor& images, const at::Tensor& labels,
                            const ClassifierSchedule& s, c10::Device device, at::Generator& generator,
                            TrainingState& state) {
  net.train();
  EpochTotals totals;
  const std::int64_t n = images.size(0), part = s.batch_size / s.micro_batches;
  const at::Tensor order = at::randperm(n, generator, at::kLong);
  for (std::int64_t i = 0; i < n; i += part) {
    const at::Tensor index = order.narrow(0, i, std::min(part, n - i));
    const at::Tensor x = images.index_select(0, index.to(images.device())).to(device, at::kFloat);
    const at::Tensor y = labels.index_select(0, index.to(labels.device())).to(device);
    if (state.pending_parts == 0) state.optimizer->zero_grad();
    const at::Tensor logits = net.forward(x);
    const at::Tensor loss = at::cross_entropy_loss(logits, y);
    (loss / static_cast<double>(s.micro_batches)).backward();
    if (++state.pending_parts == s.micro_batches) {
      state.optimizer->step();
      state.pending_parts = 0;
      if (state.average) state.average->update(net);
    }
    totals.loss_sum += loss.item<double>() * static_cast<double>(index.size(0));
    totals.correct += logits.argmax(1).eq(y).sum().item<std::int64_t>();
    totals.seen += index.size(0);
  }
  return totals;
}

void log_epoch(std::ostream& log, std::int64_t epoch, const ClassifierSchedule& s, const EpochTotals& totals,
               double validation, const SelectedEpoch& best, double lr, double seconds) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "  epoch " << epoch << "/" << s.epochs << ": train loss "
       << totals.loss_sum / static_cast<double>(totals.seen) << ", train accuracy "
       << static_cast<double>(totals.correct) / static_cast<double>(totals.seen) << ", validation " << validation
       << " (best " << best.validation_accuracy << " at epoch " << best.best_epoch << "), lr "
       << std::defaultfloat << std::setprecision(3) << lr << ", " << std::fixed << std::setprecision(1) << seconds
       << " s\n";
  log << line.str() << std::flush;
}

}  // namespace

double scheduled_learning_rate(const ClassifierSchedule& schedule, std::int64_t epoch) {
  double lr = schedule.lr;
  if (schedule.lr_step_epochs <= 0) return lr;
  for (std::int64_t e = 1; e <= epoch; ++e) {
    if (e % schedule.lr_step_epochs == 0) lr *= schedule.lr_step_gamma;
  }
  return lr;
}

double classifier_accuracy(ImageClassifier& net, const at::Tensor& images, const at::Tensor& labels,
                           std::int64_t batch) {
  check_labelled(images, labels, "scored");
  if (batch < 1) throw std::invalid_argument("classifier_accuracy: batch must be at least 1");
  net.eval();
  torch::NoGradGuard no_grad;
  const c10::Device device = engine::module_device(net);
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < images.size(0); i += batch) {
    const std::int64_t n = std::min(batch, images.size(0) - i);
    const at::Tensor predicted = net.forward(images.narrow(0, i, n).to(device, at::kFloat)).argmax(1).to(at::kCPU);
    correct += predicted.eq(labels.narrow(0, i, n).to(at::kCPU)).sum().item<std::int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(images.size(0));
}

SelectedEpoch train_selecting_epoch(ImageClassifier& net, const at::Tensor& train_images,
                                    const at::Tensor& train_labels, const at::Tensor& validation_images,
                                    const at::Tensor& validation_labels, const ClassifierSchedule& schedule,
                                    c10::Device device, std::uint64_t seed, std::ostream& log) {
  check_schedule(schedule);
  check_labelled(train_images, train_labels, "training");
  check_labelled(validation_images, validation_labels, "validation");
  at::manual_seed(seed);  // dropout draws from the global generator
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  net.to(device);
  TrainingState state;
  state.optimizer = make_optimizer(net, schedule);
  if (schedule.ema_decay > 0) state.average = std::make_unique<ParameterAverage>(net, schedule.ema_decay);

  const auto start = std::chrono::steady_clock::now();
  const std::int64_t log_every = std::max<std::int64_t>(1, schedule.epochs / 10);
  SelectedEpoch best;
  best.validation_accuracy = -1;
  NetState kept;
  for (std::int64_t epoch = 1; epoch <= schedule.epochs; ++epoch) {
    const double lr = scheduled_learning_rate(schedule, epoch - 1);
    set_learning_rate(*state.optimizer, schedule, lr);
    const EpochTotals totals = train_one_epoch(net, train_images, train_labels, schedule, device, generator, state);
    if (state.average) state.average->swap_with(net);
    const double accuracy = classifier_accuracy(net, validation_images, validation_labels);
    if (accuracy >= best.validation_accuracy) {
      best.validation_accuracy = accuracy;
      best.best_epoch = epoch;
      kept = NetState::of(net);
    }
    if (state.average) state.average->swap_with(net);
    best.epochs_run = epoch;
    if (epoch % log_every == 0 || epoch == schedule.epochs) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      log_epoch(log, epoch, schedule, totals, accuracy, best, lr, seconds);
    }
  }
  kept.load_into(net);
  net.eval();
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "  selected epoch " << best.best_epoch << "/" << best.epochs_run
       << ": validation accuracy " << best.validation_accuracy << "\n";
  log << line.str() << std::flush;
  return best;
}

}  // namespace privdiff::sdk::evaluation
