#pragma once
/// @file
/// DPImageBench's downstream classifiers (Gong et al., github.com/2019ChenGong/DPImageBench, read at
/// commit 565f8d7): ResNet, Wide ResNet and ResNeXt as evaluation/classifier/{resnet,wrn,resnext}.py
/// define them, layer for layer and in the same parameter order, with the hyper-parameters and the
/// training schedule evaluation/evaluator.py (Evaluator.cal_acc) gives them.
///
/// The protocol there: the synthetic set (60,000 images, `gen.data_num`) is shuffled with
/// numpy's default_rng(0) and its first 55,000 images train each classifier. The epoch is selected
/// on a validation set: by default (`eval.mode = val`) real training images held out from the
/// generator's training (data/dataset_loader.py, torch random_split after manual_seed(0): 5,000 of
/// MNIST/FMNIST's 60,000 and of CIFAR's 50,000); with `eval.mode = syn` the remaining 5,000
/// synthetic images. Every epoch is scored on the validation set and on the real test set, with
/// the EMA weights; the reported accuracy of a network is the test accuracy of the epoch with the
/// best validation accuracy (`>=`: a tie goes to the later epoch), and the benchmark reports the
/// mean (and std) over the networks. Above 32 x 32 pixels only ResNet and WRN are trained.
/// Images enter as x * 2 - 1 from [0, 1]; here they are expected in [-1, 1] already.
///
/// DPImageBench picks architectures and schedule by dataset, not by channel count: any dataset
/// whose name contains "cifar" (CIFAR-10/100) gets the large networks and SGD for 200 epochs;
/// everything else (MNIST, FashionMNIST, CelebA, Camelyon, EuroSAT — RGB too) the defaults and Adam
/// for 50 epochs. Hence BenchmarkRegime.

#include <privdiff/evaluation/classifier_training.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk::evaluation {

enum class BenchmarkNetwork { resnet, wrn, resnext };
PRIVDIFF_SDK_API std::string to_string(BenchmarkNetwork network);
/// "resnet" | "wrn" | "resnext"; throws std::invalid_argument naming the choices.
PRIVDIFF_SDK_API BenchmarkNetwork benchmark_network_from_string(const std::string& name);

/// DPImageBench's two settings, chosen by the sensitive dataset's name.
enum class BenchmarkRegime {
  cifar,      ///< ResNet-164 (basic blocks), WRN-28-10, ResNeXt-28 (8 groups, widen 10); SGD, 200 epochs
  non_cifar,  ///< ResNet-110 (basic blocks), WRN-40-4, ResNeXt-29 (8 groups, widen 4); Adam, 50 epochs
};
PRIVDIFF_SDK_API std::string to_string(BenchmarkRegime regime);
/// cifar when the name contains "cifar" (case-sensitive, as evaluator.py tests it), else non_cifar.
PRIVDIFF_SDK_API BenchmarkRegime benchmark_regime_for_dataset(const std::string& dataset_name);

/// Synthetic images that train each classifier (the first 55,000 after the shuffle).
inline constexpr std::int64_t dpimagebench_synthetic_train_images = 55000;

/// One network of the family; depth etc. as the Python constructors take them.
struct BenchmarkArchitecture {
  BenchmarkNetwork network = BenchmarkNetwork::resnet;
  /// resnet: 6n + 2 (n basic blocks per stage); wrn: 6n + 4; resnext: (depth - 2) / 9 bottlenecks
  /// per stage, rounded down as DPImageBench does (its CIFAR "depth 28" has 2, like depth 20).
  std::int64_t depth = 110;
  std::int64_t widen_factor = 1;  ///< wrn, resnext
  std::int64_t cardinality = 1;   ///< resnext: groups of the 3 x 3 convolutions
  double dropout = 0;             ///< wrn only (DPImageBench passes 0.3 to ResNeXt too, which ignores it)
};

PRIVDIFF_SDK_API BenchmarkArchitecture dpimagebench_architecture(BenchmarkNetwork network, BenchmarkRegime regime);
/// e.g. "WRN-40-4 (dropout 0.3)", "ResNeXt-28 (8 groups, widen 10: 2 bottlenecks per stage)".
PRIVDIFF_SDK_API std::string describe(const BenchmarkArchitecture& architecture);

/// The networks DPImageBench trains at this resolution: all three up to 32 x 32, ResNet and WRN above.
PRIVDIFF_SDK_API std::vector<BenchmarkNetwork> dpimagebench_networks(std::int64_t image_size);

/// The network for square images of `channels` x image_size x image_size, initialised as the
/// Python code does (He-normal convolutions, fan-out) from the global generator. image_size must be
/// a multiple of 4: the final average pool is image_size / 4 wide and must leave 1 x 1 (28, 32,
/// 64 and 128 are DPImageBench's); throws std::invalid_argument otherwise or for impossible depths.
PRIVDIFF_SDK_API std::shared_ptr<ImageClassifier> make_benchmark_classifier(const BenchmarkArchitecture& architecture,
                                                                            std::int64_t channels,
                                                                            std::int64_t image_size,
                                                                            std::int64_t classes);
PRIVDIFF_SDK_API std::shared_ptr<ImageClassifier> make_benchmark_classifier(BenchmarkNetwork network,
                                                                            BenchmarkRegime regime,
                                                                            std::int64_t channels,
                                                                            std::int64_t image_size,
                                                                            std::int64_t classes);

/// evaluator.py's schedule. cifar: SGD lr 0.1, momentum 0.9, weight decay 5e-4, batch 126, 200
/// epochs, StepLR 60 / 0.2. non_cifar: Adam lr 0.01, batch 256, 50 epochs, StepLR 20 / 0.2, the
/// batch in 16 parts at 64 x 64 and 64 parts at 128 x 128 (its n_splits). Both: EMA 0.9999.
PRIVDIFF_SDK_API ClassifierSchedule dpimagebench_schedule(BenchmarkRegime regime, std::int64_t image_size);

}  // namespace privdiff::sdk::evaluation
