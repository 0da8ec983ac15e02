#pragma once
/// @file
/// A generic supervised loop for the downstream classifiers that score synthetic images: train on
/// one set, score a validation set after every epoch, and end with the weights of the best epoch.
/// It is the shape of DPImageBench's evaluation (evaluation/evaluator.py, cal_acc) and of DPDM's:
/// the real test set is only scored afterwards, by the caller, never selected on.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <ostream>

namespace privdiff::sdk::evaluation {

/// A classifier of images float [N, C, H, W] in [-1, 1] to logits [N, classes].
class PRIVDIFF_SDK_API ImageClassifier : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& images) = 0;
};

struct ClassifierSchedule {
  enum class Optimizer { adam, sgd };
  std::int64_t epochs = 1;
  std::int64_t batch_size = 128;  ///< images per optimizer step
  Optimizer optimizer = Optimizer::adam;
  double lr = 1e-3;
  double momentum = 0;      ///< SGD only
  double weight_decay = 0;  ///< L2 added to the gradient (torch's Adam and SGD `weight_decay`)
  /// torch.optim.lr_scheduler.StepLR stepped once per epoch: the rate is multiplied by
  /// lr_step_gamma after every lr_step_epochs epochs. 0: a constant rate.
  std::int64_t lr_step_epochs = 0;
  double lr_step_gamma = 1;
  /// An exponential moving average of the parameters (DPImageBench's evaluation/ema.py), 0: none.
  /// After optimizer step n: average -= (1 - d_n) (average - parameters), d_n = min(ema_decay,
  /// (1 + n) / (10 + n)). Validation, and the weights kept, are then the average's (with the live
  /// BatchNorm statistics, as there).
  double ema_decay = 0;
  /// Each step's batch goes through forward/backward in this many equal parts (gradients summed,
  /// each part's loss divided by the count): memory for large images, and BatchNorm then sees
  /// batch_size / micro_batches images. Parts of consecutive epochs join up into steps, as in
  /// DPImageBench's accumulation. Must divide batch_size.
  std::int64_t micro_batches = 1;
};

/// The learning rate of a 0-based epoch under the schedule's StepLR, computed as torch's chained
/// form does (one multiplication per boundary), so the doubles are the same.
PRIVDIFF_SDK_API double scheduled_learning_rate(const ClassifierSchedule& schedule, std::int64_t epoch);

struct SelectedEpoch {
  double validation_accuracy = 0;  ///< in [0, 1], of the kept epoch
  std::int64_t best_epoch = 0;     ///< 1-based: the weights after this many epochs are kept
  std::int64_t epochs_run = 0;
};

/// Trains `net` on `device` (moving it there) with the schedule; labels int64 [N]. After every
/// epoch it scores the validation set and keeps a copy of the parameters and buffers (BatchNorm
/// running statistics) of the best epoch, a tie going to the later epoch (DPImageBench's `>=`);
/// at the end the net holds that copy, in eval mode. Deterministic for a seed on a given device:
/// the shuffles come from a generator seeded with `seed`, and dropout from the global generator,
/// which this call seeds with `seed` (the weights' initialisation is the caller's). Logs a line
/// every ~10% of the epochs and the selection; throws std::invalid_argument for empty or
/// mismatched data and impossible schedules.
PRIVDIFF_SDK_API SelectedEpoch train_selecting_epoch(ImageClassifier& net, const at::Tensor& train_images,
                                                     const at::Tensor& train_labels,
                                                     const at::Tensor& validation_images,
                                                     const at::Tensor& validation_labels,
                                                     const ClassifierSchedule& schedule, c10::Device device,
                                                     std::uint64_t seed, std::ostream& log);

/// Top-1 accuracy in [0, 1] in eval mode (the net is left there), without gradients, `batch`
/// images at a time on the net's device. Throws std::invalid_argument for no images.
PRIVDIFF_SDK_API double classifier_accuracy(ImageClassifier& net, const at::Tensor& images, const at::Tensor& labels,
                                            std::int64_t batch = 500);

}  // namespace privdiff::sdk::evaluation
