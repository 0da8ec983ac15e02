#pragma once
/// @file
/// The Inception-V3 of FID and the Inception Score, as the field computes them: pytorch-fid's
/// `fid_inception_v3` (the TensorFlow 2015-12-05 graph ported to PyTorch), i.e. torchvision's
/// Inception3 with 1008 classes, no auxiliary classifier, and the FID blocks: Mixed_5b..d, 6b..e
/// and 7b average-pool their pool branch without counting the zero padding, Mixed_7c max-pools it.
/// Every conv unit is a bias-free convolution, BatchNorm (eps 0.001) and ReLU.
///
/// Weights: supplied by the user, never downloaded. pytorch-fid's release file
/// pt_inception-2015-12-05-6726825d.pth (https://github.com/mseitzer/pytorch-fid/releases/download/
/// fid_weights/pt_inception-2015-12-05-6726825d.pth) was saved before torch 1.6's zip format, which
/// is the only one LibTorch reads: convert it once with
///   /usr/bin/python3 scripts/convert_inception_weights.py pt_inception-2015-12-05-6726825d.pth OUT.pth
/// The network is identified by its tensors: every name and shape of torchvision's state dict
/// (Conv2d_1a_3x3.conv.weight [32, 3, 3, 3], ..., fc.weight [1008, 2048]) must be present.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace privdiff::sdk::evaluation {

/// Inception's input side (pixels are resized to this before the network).
inline constexpr std::int64_t inception_input_size = 299;
/// Classes of the TF graph's classifier (1000 ImageNet classes + 8 unused).
inline constexpr std::int64_t inception_classes = 1008;

struct InceptionOutputs {
  at::Tensor pool3;   ///< [N, 2048 / width_divisor] float: the global average pool (FID's features)
  at::Tensor logits;  ///< [N, 1008] float: fc(pool3) (the Inception Score's classifier)
};

class InceptionLayer;  // one conv unit or mixed block (inception_v3.cpp)

class PRIVDIFF_SDK_API FidInceptionV3 : public torch::nn::Module {
 public:
  /// width_divisor 1 is the real network; 2, 4, 8 or 16 divide every channel count except the
  /// 3 input channels and the 1008 classes (a small network of the same structure, for tests).
  /// Parameter and buffer names are torchvision's, so the real state dict loads by name.
  explicit FidInceptionV3(std::int64_t width_divisor = 1);
  ~FidInceptionV3() override;

  /// images [N, 3, 299, 299] in [-1, 1], on the network's device -> pool3 and logits there.
  InceptionOutputs forward(const at::Tensor& images);
  std::int64_t width_divisor() const { return width_divisor_; }
  std::int64_t feature_dimension() const { return 2048 / width_divisor_; }

 private:
  std::int64_t width_divisor_;
  std::vector<std::shared_ptr<InceptionLayer>> stem_, mixed_;
  torch::nn::Linear fc_{nullptr};
};

/// Reads a state dict saved by torch.save (zip format, a plain dict of name -> tensor; see the
/// file comment), infers width_divisor from Conv2d_1a_3x3.conv.weight, checks that every expected
/// tensor is present with its shape (num_batches_tracked may be there or not; any other extra name
/// is refused) and returns the network in eval mode on the CPU. Throws std::runtime_error naming
/// the file, the tensor, the expected and the found shape; for a file LibTorch cannot read as such
/// a dict (the legacy format, an OrderedDict, not a torch file at all), the message gives the
/// conversion command.
PRIVDIFF_SDK_API std::shared_ptr<FidInceptionV3> load_fid_inception(const std::filesystem::path& file);

/// Features of images [N, C, H, W] in [-1, 1] (float; C = 1, repeated to 3, or 3; any H, W),
/// bilinearly resized to 299x299 (align_corners false), in batches of `batch`, without gradient,
/// in eval mode (the network is left in eval mode), on the network's device. Results on the CPU.
PRIVDIFF_SDK_API InceptionOutputs inception_features(FidInceptionV3& network, const at::Tensor& images,
                                                     std::int64_t batch = 50);

struct InceptionScore {
  double mean = 0;
  double std = 0;  ///< population standard deviation over the splits (numpy's default, ddof 0)
};

/// The Inception Score of logits [N, K] (N >= splits): in double precision, per split
/// exp(mean_x KL(p(y|x) || p(y))) with p(y|x) = softmax(logits) and p(y) the split's mean; the mean
/// and std over splits. Splits as the original (improved-GAN) code and torch-fidelity (without its
/// shuffle): split i is rows [i N / splits, (i + 1) N / splits) (integer division), so no image is
/// dropped and split sizes differ by at most one when N is not divisible.
PRIVDIFF_SDK_API InceptionScore inception_score(const at::Tensor& logits, std::int64_t splits = 10);

}  // namespace privdiff::sdk::evaluation
