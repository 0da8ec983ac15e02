#pragma once
/// @file
/// CompVis's latent diffusion models (github.com/CompVis/latent-diffusion, the code DP-LDM forks)
/// rebuilt from privdiff's per-example layers under CompVis's own parameter names: the UNetModel of
/// openaimodel.py (SpatialTransformers with cross-attention to a context, or the legacy attention
/// blocks; scale-shift norm and residual resampling as options; class labels through label_emb),
/// and the KL autoencoder of ldm.models.autoencoder.AutoencoderKL (model.py's Encoder and Decoder,
/// attention in chosen levels, the quant convolutions). A LatentDiffusion checkpoint converted by
/// scripts/convert_to_safetensors.py --ldm-config keeps its YAML's model.params as JSON in the
/// metadata key "ldm.config"; compvis_ldm_config reads it. Outputs equal CompVis's own
/// (tests/fixtures/weights/compvis). Options the ports lack are refused by name.

#include <privdiff/sdk_api.hpp>
#include <privdiff/text_encoders/compvis_bert_embedder.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {
class Conv2d;
class Embedding;
class GroupNorm;
class Linear;
}  // namespace privdiff::sdk::engine

namespace privdiff::sdk::diffusion {

/// openaimodel.UNetModel's arguments (the ones LDM configs set).
struct CompVisUNetConfig {
  std::int64_t image_size = 32, in_channels = 3, out_channels = 3, model_channels = 64, num_res_blocks = 2;
  std::vector<std::int64_t> attention_resolutions;  ///< downsampling factors (1, 2, 4, ...) with attention
  std::vector<std::int64_t> channel_mult{1, 2, 4, 8};
  std::int64_t num_heads = -1, num_head_channels = -1;  ///< one of them set, as in CompVis's code
  bool use_scale_shift_norm = false, resblock_updown = false, use_spatial_transformer = false;
  std::int64_t transformer_depth = 1, context_dim = 0;
  std::int64_t num_classes = 0;  ///< label_emb rows (0: none)
  double dropout = 0;
  /// Heads of an attention block at `channels` (num_head_channels, if set, fixes the head width).
  std::int64_t heads_at(std::int64_t channels) const { return num_head_channels > 0 ? channels / num_head_channels : num_heads; }
};

/// ldm.models.autoencoder.AutoencoderKL's embed_dim and ddconfig.
struct CompVisAutoencoderConfig {
  std::int64_t embed_dim = 4, z_channels = 4, resolution = 256, in_channels = 3, out_ch = 3, ch = 128, num_res_blocks = 2;
  std::vector<std::int64_t> ch_mult{1, 2, 4, 4};
  std::vector<std::int64_t> attn_resolutions;  ///< resolutions whose levels have attention
  double dropout = 0;
};

/// LatentDiffusion's model.params: the two networks, the conditioning stage (cross-attention context:
/// a class embedder, or a text encoder for txt2img), and the discrete noise schedule it was trained
/// under (epsilon-prediction).
struct CompVisLdmConfig {
  CompVisUNetConfig unet;
  CompVisAutoencoderConfig autoencoder;
  std::int64_t classes = 0;  ///< ClassEmbedder n_classes (0: unconditional); its embed_dim is unet.context_dim
  /// BERTEmbedder's params (txt2img-1p4B's layout: n_embed is unet.context_dim), when the conditioning
  /// stage is the text encoder; then classes is 0.
  std::optional<text_encoders::CompVisBertConfig> text;
  double linear_start = 1e-4, linear_end = 2e-2, scale_factor = 1.0;
  std::int64_t timesteps = 1000;
};

/// The "ldm.config" JSON (`what` names it in errors). Throws std::invalid_argument naming the first
/// option the ports do not support and what they support.
PRIVDIFF_SDK_API CompVisLdmConfig compvis_ldm_config(const std::string& json_text, const std::string& what);

namespace compvis {
class ResBlock;
class AutoencoderResnet;
class AutoencoderAttention;
}  // namespace compvis

class PRIVDIFF_SDK_API CompVisUNet : public torch::nn::Module {
 public:
  explicit CompVisUNet(CompVisUNetConfig config);
  ~CompVisUNet() override;
  /// UNetModel.forward(x, timesteps, context, y): x [N, C, H, W], timesteps [N] (fractional allowed),
  /// context [N, L, context_dim] (undefined without transformers), labels int64 [N] (with num_classes).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& timesteps, const at::Tensor& context,
                     const at::Tensor& labels = {});
  const CompVisUNetConfig& config() const { return config_; }
  /// Each layer's parameter-name prefix ("input_blocks.1.1."), its role (io, embedding, conditioning,
  /// resblock (resamplers too), attention) and its block number in forward order (-1 for none).
  struct Role {
    std::string prefix, role;
    int block;
  };
  const std::vector<Role>& roles() const { return roles_; }

 private:
  struct Block;
  std::vector<Role> roles_;
  at::Tensor run(Block& block, at::Tensor h, const at::Tensor& emb, const at::Tensor& context);
  CompVisUNetConfig config_;
  std::shared_ptr<engine::Linear> time_0_, time_2_;
  std::shared_ptr<engine::Embedding> label_emb_;
  torch::nn::ModuleList input_blocks_, output_blocks_;
  std::vector<std::shared_ptr<Block>> inputs_, outputs_;
  std::shared_ptr<Block> middle_;
  std::shared_ptr<engine::GroupNorm> out_norm_;
  std::shared_ptr<engine::Conv2d> conv_in_, out_conv_;
};

class PRIVDIFF_SDK_API CompVisAutoencoderKL : public torch::nn::Module {
 public:
  explicit CompVisAutoencoderKL(CompVisAutoencoderConfig config);
  ~CompVisAutoencoderKL() override;
  /// The posterior's mean and log-variance (clamped to [-30, 20]) of images [N, in, H, W].
  std::pair<at::Tensor, at::Tensor> encode(const at::Tensor& images);
  /// Images from latents [N, embed_dim, h, w].
  at::Tensor decode(const at::Tensor& latents);
  const CompVisAutoencoderConfig& config() const { return config_; }

 private:
  struct Level;
  CompVisAutoencoderConfig config_;
  std::vector<std::shared_ptr<Level>> down_, up_;
  std::shared_ptr<compvis::AutoencoderResnet> enc_mid_1_, enc_mid_2_, dec_mid_1_, dec_mid_2_;
  std::shared_ptr<compvis::AutoencoderAttention> enc_mid_attn_, dec_mid_attn_;
  std::shared_ptr<engine::GroupNorm> enc_norm_out_, dec_norm_out_;
  std::shared_ptr<engine::Conv2d> enc_conv_in_, enc_conv_out_, dec_conv_in_, dec_conv_out_, quant_conv_, post_quant_conv_;
};

/// LatentDiffusion's module tree, so that a checkpoint's names are its own: model.diffusion_model
/// (the UNet), first_stage_model (the autoencoder), cond_stage_model.embedding (the ClassEmbedder,
/// when class-conditional) or cond_stage_model.transformer.* (the BERTEmbedder, when text-conditioned)
/// and the buffer scale_factor (what LDM scales latents by).
class PRIVDIFF_SDK_API CompVisLatentDiffusion : public torch::nn::Module {
 public:
  explicit CompVisLatentDiffusion(const CompVisLdmConfig& config);
  std::shared_ptr<CompVisUNet> unet;
  std::shared_ptr<CompVisAutoencoderKL> autoencoder;
  std::shared_ptr<engine::Embedding> class_embedding;  ///< null when unconditional or text-conditioned
  /// cond_stage_model itself (its parameters cond_stage_model.transformer.*): null unless text-conditioned.
  std::shared_ptr<text_encoders::CompVisBertEmbedder> text_encoder;
  at::Tensor scale_factor;
};

/// abar_0 .. abar_{T-1} of LDM's "linear" schedule (make_beta_schedule: betas on a line between the
/// square roots of linear_start and linear_end), in double precision as LDM computes them.
PRIVDIFF_SDK_API std::vector<double> compvis_alphas_cumprod(const CompVisLdmConfig& config);

}  // namespace privdiff::sdk::diffusion
