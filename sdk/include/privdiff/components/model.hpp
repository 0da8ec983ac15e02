#pragma once
/// @file
/// Model: a denoiser D(x, sigma, cond) under a preconditioning, built from SDK layers.

#include <privdiff/components/component.hpp>
#include <privdiff/sdk_api.hpp>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk {

class Dataset;

/// Conditioning for one batch. `labels` is int64 [B]; -1 means "no label" (the unconditional
/// branch of classifier-free guidance). An undefined tensor means an unconditional model.
///
/// `captions` holds one UTF-8 caption per example, in batch order, when the data are captioned
/// (Dataset::has_captions); it is empty otherwise. The empty caption "" is the unconditional one
/// (caption dropout in training, the null prompt of classifier-free guidance on text). A model that
/// conditions on text tokenizes the captions itself (its text encoder owns its tokenizer); the engine
/// hands them over untouched, row for row with `labels`, on every chunk and rank.
struct Conditioning {
  Conditioning(at::Tensor labels_ = {}, std::vector<std::string> captions_ = {})  // NOLINT: Conditioning{labels}
      : labels(std::move(labels_)), captions(std::move(captions_)) {}
  at::Tensor labels;
  std::vector<std::string> captions;
};

/// The conditioning of the rows `rows` (int64 [R], indices into the batch), labels and captions
/// alike. Throws std::invalid_argument for a row outside the batch.
PRIVDIFF_SDK_API Conditioning select_rows(const Conditioning& cond, const at::Tensor& rows);

/// A parameter with the role and block index that parameter selectors match on, e.g.
/// {"down.2.attn.qkv.weight", "attention", 2, tensor}. Roles: "attention", "cross_attention",
/// "conditioning", "resblock", "embedding", "norm", "io", "autoencoder" (a latent model's codec,
/// trained only by a stage that selects it, by its own objective). An adapter's parameters (e.g. LoRA's,
/// grafted on by an adapter plugin) take the role "adapter" (engine::parameters_with_roles), whatever
/// role the model gives them.
struct ParameterInfo {
  std::string name;
  std::string role;
  int block_index = -1;  ///< -1 when the parameter belongs to no numbered block
  at::Tensor parameter;
};

/// Images a model shows after a stage (e.g. an autoencoder's reconstructions); the host saves them as
/// STAGE-NAME.png in the run directory.
struct StageFigure {
  std::string name;   ///< the file-name part, e.g. "reconstructions"
  at::Tensor images;  ///< [N, C, H, W] in [-1, 1]
  std::int64_t columns = 10;
};

class PRIVDIFF_SDK_API Model : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::model;
  ~Model() override;

  /// The module tree (owned by the model); what optimizers and checkpoints work on.
  virtual torch::nn::Module& module() = 0;
  /// The preconditioned denoiser: an estimate of the clean sample given x = sample + sigma * noise.
  /// x: [B, ...sample_shape()], sigma: [B] absolute noise levels (not multipliers).
  virtual at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) = 0;
  /// Every parameter with its role and block index.
  virtual std::vector<ParameterInfo> parameters_with_roles() = 0;
  /// Shape of one sample in the space the sampler works in (latent shape for latent models).
  virtual std::vector<std::int64_t> sample_shape() const = 0;
  /// Per-row training losses for a batch of images [B, C, H, W] with their conditioning:
  /// `noise_multiplicity` (K) rows per example, example-major, shape [B * K]; the loss of example i
  /// is the mean of its K rows (e.g. K noise draws of the denoising loss, DPDM's noise
  /// multiplicity). All randomness comes from `generator`.
  virtual at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond,
                                   std::int64_t noise_multiplicity, at::Generator& generator) = 0;
  /// Shape [C, H, W] of the images it trains on: the host refuses data of another shape before a
  /// run starts. Default: sample_shape() (pixel-space models); latent models override it.
  virtual std::vector<std::int64_t> image_shape() const { return sample_shape(); }
  /// Whether denoise() and training_loss() read Conditioning::captions (a text-conditioned model, with
  /// its text encoder and tokenizer). The host refuses prompts for a model that does not, and captioned
  /// data are then trained on as labelled images. Default: false.
  virtual bool conditions_on_text() const { return false; }
  /// Image -> sampler space. Identity for pixel-space models.
  virtual at::Tensor encode(const at::Tensor& images) { return images; }
  /// Sampler space -> image in [-1, 1]. Identity for pixel-space models.
  virtual at::Tensor decode(const at::Tensor& latents) { return latents; }
  /// Called by the host after every non-private stage, with the stage's data (public, or a DP
  /// release: anything computed from it is free to keep): a model may fit what a later stage relies
  /// on (a latent model's scale factor, after its autoencoder trained) and return figures to save.
  /// Never called after a private stage: a statistic of private data computed without noise would
  /// void the guarantee. The parameters the stage trained still have requires_grad set.
  virtual std::vector<StageFigure> after_public_stage(const Dataset& data) { return {}; }
  /// For run.init_from a run of another model type: the part of this model that such a model is
  /// (e.g. a latent model's autoencoder, for an `autoencoder` run), loaded from it name by name; the
  /// rest keeps its initialisation. Null (the default): such a run cannot initialise this model.
  virtual torch::nn::Module* part_initialised_by(const std::string& model_type) { return nullptr; }
};

}  // namespace privdiff::sdk
