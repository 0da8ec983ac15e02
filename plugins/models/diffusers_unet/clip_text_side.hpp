#pragma once
// diffusers_unet's text side for a UNet2DConditionModel (Stable Diffusion's layout): the captions
// tokenized by CLIP's BPE (the pipeline's tokenizer/), read by its CLIPTextModel (text_encoder/, loaded
// with its weights and frozen, as the DP fine-tuning of SD does: DP-LoRA, DPImageBench's DP-LDM(SD)),
// whose last hidden state the UNet cross-attends to.
#include <privdiff/config/config.hpp>
#include <privdiff/text/clip_tokenizer.hpp>
#include <privdiff/text_encoders/clip_text_model.hpp>

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace privdiff::plugins::diffusers_unet {

class ClipTextSide {
 public:
  /// From the [model] keys text_encoder and tokenizer; `cross_attention_dim` is the UNet's. KeyValueError
  /// at the key for what is missing or does not fit (a width, a vocabulary, a context of another size).
  ClipTextSide(const sdk::Config& c, std::int64_t cross_attention_dim);
  /// The encoder's last hidden states [N, 77, width] for the captions (no gradient), the encoder moved to
  /// `device` and `dtype` first (the UNet's).
  at::Tensor hidden_states(const std::vector<std::string>& captions, std::int64_t n, c10::Device device, at::ScalarType dtype);

 private:
  std::shared_ptr<sdk::text_encoders::ClipTextModel> encoder_;
  sdk::ClipTokenizer tokenizer_;
};

}  // namespace privdiff::plugins::diffusers_unet
