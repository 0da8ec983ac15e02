#pragma once
/// @file
/// A DDPM++-style UNet (Song et al. 2021, as DPDM uses it) built only from per-example layers, so
/// DP-SGD gets closed-form per-example gradients for every parameter: a sinusoidal noise-level
/// embedding plus a learned class embedding (with a null class for classifier-free guidance),
/// residual blocks with GroupNorm, SiLU and skip rescaling by 1/sqrt(2), self-attention at chosen
/// resolutions, strided-conv down-sampling and nearest-neighbour up-sampling.
/// DPDM's MNIST configuration (32 channels, multipliers 1,2,2, two blocks, attention at 7) has
/// about 1.75M parameters.

#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace privdiff::sdk::diffusion {

struct UnetConfig {
  std::int64_t image_channels = 1;
  std::int64_t image_size = 28;
  std::int64_t channels = 32;
  std::vector<std::int64_t> channel_mult{1, 2, 2};
  std::int64_t num_res_blocks = 2;
  std::vector<std::int64_t> attention_resolutions{7};
  double dropout = 0.0;
  std::int64_t num_classes = 10;  ///< 0: unconditional; else labels in [0, num_classes), num_classes = null label
  /// 0: self-attention blocks (DDPM++, as DPDM). > 0: LDM's SpatialTransformers with this many
  /// heads at the attention resolutions (and in the middle), cross-attending to the class embedding
  /// as a context token (which then is not added to the noise-level embedding) — DP-LDM's model.
  std::int64_t transformer_heads = 0;
  std::int64_t transformer_head_dim = 32;  ///< 0: the block's channels / heads (LDM's num_head_channels = -1)
  std::int64_t transformer_depth = 1;
  std::int64_t context_dim = 0;  ///< width of the class context token; 0: 4 * channels
  /// Transformer mode on text: the SpatialTransformers cross-attend to the context forward() is given
  /// (a text encoder's [N, T, context_dim] caption embeddings) instead of the class token; no class
  /// embedding (num_classes must be 0).
  bool text_context = false;
};

class ResidualBlock;
class AttentionBlock;
class SpatialTransformer;

class PRIVDIFF_SDK_API Unet : public torch::nn::Module {
 public:
  explicit Unet(UnetConfig config);
  ~Unet() override;
  /// F(x; c_noise, labels): x [N, C, H, W], c_noise [N] (the preconditioned noise level),
  /// labels int64 [N] (num_classes = no label) or undefined.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels);
  /// The same with the text context [N, T, context_dim] (UnetConfig::text_context), one row per x's row.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels,
                     const at::Tensor& text_context);
  const UnetConfig& config() const { return config_; }
  /// Every parameter with its role ("attention", "resblock", "embedding" (noise level),
  /// "conditioning" (class embedding), "io") and the index of its block in forward order
  /// (-1 for none).
  std::vector<ParameterInfo> parameters_with_roles();
  std::int64_t parameter_count();

 private:
  UnetConfig config_;
  std::shared_ptr<engine::Linear> sigma_mlp1_, sigma_mlp2_;
  std::shared_ptr<engine::Embedding> class_embedding_;
  std::shared_ptr<engine::Conv2d> conv_in_, conv_out_;
  std::shared_ptr<engine::GroupNorm> norm_out_;
  struct Stage {
    std::vector<std::shared_ptr<ResidualBlock>> blocks;
    std::vector<std::shared_ptr<AttentionBlock>> attention;  ///< parallel to blocks; null where none
    std::vector<std::shared_ptr<SpatialTransformer>> transformers;  ///< the same, in transformer mode
    std::shared_ptr<engine::Conv2d> resample;                ///< down (stride 2) or up (after upsampling)
  };
  std::vector<Stage> down_, up_;
  std::shared_ptr<ResidualBlock> mid1_, mid2_;
  std::shared_ptr<AttentionBlock> mid_attention_;
  std::shared_ptr<SpatialTransformer> mid_transformer_;
  std::vector<std::pair<std::string, std::pair<std::string, int>>> roles_;  // parameter-name prefix -> role, block
};

/// The UNet as the raw network F the preconditioned denoiser and loss call (it must outlive the result).
PRIVDIFF_SDK_API Network as_network(Unet& unet);

}  // namespace privdiff::sdk::diffusion
