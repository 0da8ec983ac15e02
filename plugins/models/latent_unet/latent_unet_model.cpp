// latent_unet: DP-LDM's latent diffusion model — a KL autoencoder and, in its latent space, an LDM
// UNet whose attention blocks are SpatialTransformers cross-attending to the class embedding.
// What a stage trains decides the objective: a stage with train = "autoencoder" trains the
// autoencoder by its own loss (and, when its data is public, fits LDM's scale factor); every other
// stage trains the UNet on the frozen autoencoder's scaled latents with the denoising loss.
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/autoencoder.hpp>
#include <privdiff/diffusion/autoencoder_recipe.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/diffusion/unet_recipe.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <stdexcept>

namespace privdiff::plugins::latent_unet {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

// The module tree: "autoencoder.*" and "unet.*" (what checkpoints and init_from see).
struct LatentNetworks : torch::nn::Module {
  LatentNetworks(const dm::AutoencoderConfig& a, const dm::UnetConfig& u)
      : autoencoder(register_module("autoencoder", std::make_shared<dm::Autoencoder>(a))),
        unet(register_module("unet", std::make_shared<dm::Unet>(u))) {}
  std::shared_ptr<dm::Autoencoder> autoencoder;
  std::shared_ptr<dm::Unet> unet;
};

class LatentUnet : public Model {
 public:
  explicit LatentUnet(const Config& c)
      : networks_(std::make_shared<LatentNetworks>(
            dm::autoencoder_config(c), dm::unet_config(c, c.get_int("latent_channels"), dm::latent_side(c)))),
        // Scaled latents have unit variance (LDM's scale factor), so sigma_data = 1.
        preconditioning_(dm::parameterization_from_string(c.get_string("preconditioning")), 1.0),
        label_dropout_(c.get_double("label_dropout")),
        image_shape_(dm::image_shape(c)) {
  }

  torch::nn::Module& module() override { return *networks_; }

  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    return dm::denoise(dm::as_network(unet()), preconditioning_, x, sigma,
                       dm::network_labels(cond.labels, unet().config().num_classes));
  }

  at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond, std::int64_t k,
                           at::Generator& generator) override {
    if (dm::is_trainable(autoencoder())) {  // K rows per example: K posterior draws
      return autoencoder().loss(k == 1 ? images : images.repeat_interleave(k, 0), generator);
    }
    if (!autoencoder().has_latent_statistics()) {
      throw std::runtime_error("latent_unet: the autoencoder's scale factor has not been fitted: train the autoencoder "
                               "on public data first (a non-private stage with train = \"autoencoder\"), or start "
                               "from a run that did (run.init_from: a latent_unet or autoencoder run)");
    }
    // The frozen autoencoder is a fixed function: the UNet's per-example gradients are all that
    // depend on the example through trainable parameters.
    return dm::denoising_loss(dm::as_network(unet()), preconditioning_, encode(images), cond.labels,
                              {k, label_dropout_, unet().config().num_classes}, generator);
  }

  std::vector<ParameterInfo> parameters_with_roles() override {
    std::vector<ParameterInfo> out;
    for (const auto& p : autoencoder().named_parameters()) out.push_back({"autoencoder." + p.key(), "autoencoder", -1, p.value()});
    for (auto info : unet().parameters_with_roles()) {
      info.name = "unet." + info.name;
      out.push_back(std::move(info));
    }
    return out;
  }

  std::vector<std::int64_t> sample_shape() const override {
    const auto& c = networks_->unet->config();
    return {c.image_channels, c.image_size, c.image_size};
  }
  std::vector<std::int64_t> image_shape() const override { return image_shape_; }

  at::Tensor encode(const at::Tensor& images) override {  // the posterior mean, scaled (no gradient)
    torch::NoGradGuard no_grad;
    return autoencoder().encode(images).mean * autoencoder().scale_factor();
  }
  at::Tensor decode(const at::Tensor& latents) override {
    torch::NoGradGuard no_grad;
    return autoencoder().decode(latents / autoencoder().scale_factor()).clamp(-1, 1);
  }

  std::vector<StageFigure> after_public_stage(const Dataset& data) override {
    if (!dm::is_trainable(autoencoder())) return {};
    return {dm::fit_autoencoder(autoencoder(), data)};
  }

  torch::nn::Module* part_initialised_by(const std::string& model_type) override {
    return model_type == "autoencoder" ? &autoencoder() : nullptr;
  }

 private:
  dm::Autoencoder& autoencoder() { return *networks_->autoencoder; }
  dm::Unet& unet() { return *networks_->unet; }
  std::shared_ptr<LatentNetworks> networks_;
  dm::Preconditioning preconditioning_;
  double label_dropout_;
  std::vector<std::int64_t> image_shape_;
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  dm::add_unet_keys(schema, {{64, "UNet base channels (DP-LDM's MNIST LDM: 64)"},
                             {{1, 2}, "UNet channel multiplier per latent resolution level (DP-LDM: [1, 2])"},
                             {1, "UNet residual blocks per level (DP-LDM: 1)"},
                             {{14, 7}, "latent resolutions with a SpatialTransformer (and one in the middle); DP-LDM: "
                                       "both levels"},
                             1, "classes for conditioning",
                             "diffusion parameterisation in latent space (sigma_data = 1: scaled latents)",
                             /*spatial_transformers=*/true});
  dm::add_autoencoder_keys(schema);
  registrar->add<LatentUnet>("latent_unet",
                             "latent diffusion (DP-LDM): KL autoencoder + UNet with SpatialTransformers cross-attending "
                             "to the class",
                             std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::latent_unet

PRIVDIFF_PLUGIN("latent_unet", "0.1.0", "latent diffusion model (DP-LDM)", privdiff::plugins::latent_unet::register_components)
