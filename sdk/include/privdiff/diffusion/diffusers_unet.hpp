#pragma once
/// @file
/// Hugging Face diffusers' UNet2DModel and UNet2DConditionModel (Stable Diffusion's UNet) rebuilt from
/// privdiff's per-example layers, with diffusers' own parameter names (down_blocks.0.resnets.0.conv1.weight,
/// ...): a diffusers folder's weights load into it by name and give the same outputs
/// (tests/fixtures/weights/diffusers, made with diffusers 0.42.1), and DP-SGD gets closed-form
/// per-example gradients for every parameter. The layouts the field's diffusers models use are
/// supported: DownBlock2D / AttnDownBlock2D levels mirrored by UpBlock2D / AttnUpBlock2D, a UNetMidBlock2D
/// with or without attention (UNet2DModel); DownBlock2D / CrossAttnDownBlock2D levels mirrored by
/// UpBlock2D / CrossAttnUpBlock2D and a UNetMidBlock2DCrossAttn, whose Transformer2DModels cross-attend
/// to the text encoder's hidden states (SD 1.x's 1x1-conv projections or SD 2.x's linear ones); sinusoidal
/// timestep embeddings, and class labels through num_class_embeds. Other options are refused by name.

#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk::diffusion {

struct DiffusersUNet2DConfig {
  std::int64_t in_channels = 3, out_channels = 3;
  std::vector<std::int64_t> block_out_channels{224, 448, 672, 896};
  std::vector<bool> attention;  ///< per down level, as AttnDownBlock2D (the up levels mirror it); default none
  std::int64_t layers_per_block = 2;
  std::int64_t norm_num_groups = 32;
  double norm_eps = 1e-5;
  std::int64_t attention_head_dim = 8;
  /// attention_head_dim null in config.json: each attention block has one head as wide as its level
  /// (diffusers' UNet2DModel then passes the block's own width as the head dimension).
  bool one_head_per_block = false;
  /// Heads of an attention block `width` channels wide.
  std::int64_t heads(std::int64_t width) const { return one_head_per_block ? 1 : width / attention_head_dim; }
  std::int64_t num_class_embeds = 0;  ///< 0: unconditional
  bool flip_sin_to_cos = true;
  double freq_shift = 0;
  bool mid_attention = true;  ///< add_attention
  std::int64_t sample_size = 0;  ///< informational (config.json's sample_size)
  /// UNet2DConditionModel: the width of the hidden states its transformers cross-attend to (the text
  /// encoder's); 0 for a UNet2DModel. Its `attention` levels are CrossAttn*Block2D levels.
  std::int64_t cross_attention_dim = 0;
  std::vector<std::int64_t> level_heads;         ///< UNet2DConditionModel: heads per level (its attention_head_dim)
  std::vector<std::int64_t> transformer_layers;  ///< UNet2DConditionModel: transformer blocks per level
  bool linear_projection = false;                ///< use_linear_projection (SD 2.x)
  bool conditional() const { return cross_attention_dim > 0; }
};

/// A UNet2DModel or UNet2DConditionModel config.json (its text; `what` names it in errors). Throws
/// std::invalid_argument naming the first key whose value privdiff's port does not support, and what it
/// supports.
PRIVDIFF_SDK_API DiffusersUNet2DConfig diffusers_unet2d_config(const std::string& json_text, const std::string& what);

class DiffusersResnet;
struct DiffusersAttend;

class PRIVDIFF_SDK_API DiffusersUNet2D : public torch::nn::Module {
 public:
  explicit DiffusersUNet2D(DiffusersUNet2DConfig config);
  ~DiffusersUNet2D() override;
  /// UNet2DModel.forward(sample, timestep, class_labels).sample: sample [N, C, H, W], timesteps [N]
  /// (or one for all), class_labels int64 [N] (undefined when unconditional); for a UNet2DConditionModel
  /// also encoder_hidden_states [N, T, cross_attention_dim] (std::invalid_argument when missing).
  at::Tensor forward(const at::Tensor& sample, const at::Tensor& timesteps, const at::Tensor& class_labels = {},
                     const at::Tensor& encoder_hidden_states = {});
  const DiffusersUNet2DConfig& config() const { return config_; }

 private:
  at::Tensor timestep_features(const at::Tensor& timesteps, std::int64_t batch) const;
  DiffusersUNet2DConfig config_;
  std::shared_ptr<engine::Conv2d> conv_in_, conv_out_;
  std::shared_ptr<engine::Linear> time_linear_1_, time_linear_2_;
  std::shared_ptr<engine::Embedding> class_embedding_;
  torch::nn::ModuleList down_blocks_, up_blocks_;
  std::shared_ptr<torch::nn::Module> mid_block_;
  std::vector<std::shared_ptr<DiffusersResnet>> mid_resnets_;
  std::shared_ptr<DiffusersAttend> mid_attend_;  // self-attention, or a Transformer2DModel
  std::shared_ptr<engine::GroupNorm> conv_norm_out_;
};

}  // namespace privdiff::sdk::diffusion
