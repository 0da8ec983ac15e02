// LatentDiffusion's module tree and noise schedule (diffusion/compvis_ldm.hpp).
#include <privdiff/diffusion/compvis_ldm.hpp>

#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>


namespace privdiff::sdk::diffusion {

CompVisLatentDiffusion::CompVisLatentDiffusion(const CompVisLdmConfig& c) {
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  unet = model->register_module("diffusion_model", std::make_shared<CompVisUNet>(c.unet));
  autoencoder = register_module("first_stage_model", std::make_shared<CompVisAutoencoderKL>(c.autoencoder));
  if (c.text) {
    text_encoder = register_module("cond_stage_model", std::make_shared<text_encoders::CompVisBertEmbedder>(*c.text));
  } else if (c.classes > 0) {
    auto cond = register_module("cond_stage_model", std::make_shared<torch::nn::Module>());
    class_embedding = cond->register_module("embedding", std::make_shared<engine::Embedding>(c.classes, c.unet.context_dim));
  }
  scale_factor = register_buffer("scale_factor", at::scalar_tensor(c.scale_factor, at::kFloat));
}

std::vector<double> compvis_alphas_cumprod(const CompVisLdmConfig& c) {
  return ddpm_alphas_cumprod("scaled_linear", c.linear_start, c.linear_end, c.timesteps);  // LDM's "linear"
}

}  // namespace privdiff::sdk::diffusion
