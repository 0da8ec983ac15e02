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
/// FIDs are comparable with published ones only on exactly those weights, so they are identified
/// twice over. Their architecture: every name and exact shape of torchvision's state dict at full
/// width (Conv2d_1a_3x3.conv.weight [32, 3, 3, 3], ..., fc.weight [1008, 2048]). Their digest: the
/// conversion script hashes its input and refuses any file whose SHA-256 is not the release's
/// (pytorch_fid_weights_sha256; the release's name carries its first 8 hex digits, torch.hub's
/// convention), then records that hash and the digest of the tensors it wrote
/// (inception_tensors_sha256) in the converted file; the loader recomputes the latter and requires
/// both. Anything else (reduced width, no record, another source, tensors changed since) is
/// refused unless the caller allows unverified weights (tests), and is then reported as such.

#include <privdiff/sdk_api.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
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

/// SHA-256 of pytorch-fid's release file pt_inception-2015-12-05-6726825d.pth (95,628,359 bytes).
/// The release's URL gives its first 8 hex digits (torch.hub's file-name convention); the whole
/// digest is the one other FID code pins for that URL (e.g. snap-research/discoscene
/// models/inception_model.py, _MODEL_URL_SHA256['tf_inception_v3']).
inline constexpr const char* pytorch_fid_weights_sha256 =
    "6726825d0af5f729cebd5821db510b11b1cfad8faad88a03f1befd49fb9129b2";
/// The conversion record scripts/convert_inception_weights.py adds to the dict (string values):
/// the SHA-256 of the file it converted, and inception_tensors_sha256 of the tensors it wrote.
inline constexpr const char* source_sha256_key = "privdiff.source_sha256";
inline constexpr const char* tensors_sha256_key = "privdiff.tensors_sha256";

/// The digest of a network's tensors, independent of the container: SHA-256 over the tensors in
/// byte order of their names, leaving out "privdiff." records and num_batches_tracked counters, each
/// as its name, "\n", its shape ("32,3,3,3"), "\n", then its values as little-endian float32 in
/// row-major order. convert_inception_weights.py computes the same (tensors_sha256 there).
PRIVDIFF_SDK_API std::string inception_tensors_sha256(const std::map<std::string, at::Tensor>& tensors);

/// Weights that are not pytorch-fid's (or not provably so), refused because the caller did not
/// allow unverified weights; what() names the file and why.
class PRIVDIFF_SDK_API UnverifiedInceptionWeights : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~UnverifiedInceptionWeights() override;
};

struct FidInceptionWeights {
  std::shared_ptr<FidInceptionV3> network;  ///< in eval mode, on the CPU
  std::string tensors_sha256;               ///< inception_tensors_sha256 of the file's tensors
  /// pytorch-fid's weights: full width, converted from the file whose SHA-256 is
  /// pytorch_fid_weights_sha256, tensors unchanged since. Only then is a FID comparable with
  /// published ones.
  bool verified = false;
  std::string unverified_reason;  ///< why not, when !verified ("no conversion record ...")
};

/// Reads a state dict saved by torch.save (zip format, a plain dict of name -> tensor plus the
/// conversion record; see the file comment) and returns the network it holds.
///  - Files that are not such a dict (the legacy format, an OrderedDict, a LibTorch archive such as
///    a privdiff checkpoint, a PNG, a damaged zip): std::runtime_error naming the file and what it is
///    (with the conversion command where converting helps).
///  - Not pytorch-fid's full-width network (a tensor missing or extra, a shape that differs):
///    std::runtime_error naming the file, the tensor, the expected and the found shape. With
///    allow_unverified, the width may be divided by 2, 4, 8 or 16 (inferred from
///    Conv2d_1a_3x3.conv.weight [32 / d, 3, 3, 3]): test networks.
///  - Not verified (reduced width, no conversion record, another source file, tensors changed since
///    conversion): UnverifiedInceptionWeights, unless allow_unverified; then the result says why.
/// num_batches_tracked may be present or not; any other extra name is refused.
PRIVDIFF_SDK_API FidInceptionWeights load_fid_inception(const std::filesystem::path& file,
                                                        bool allow_unverified = false);

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
