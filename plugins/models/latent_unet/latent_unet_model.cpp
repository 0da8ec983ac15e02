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
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <stdexcept>

namespace privdiff::plugins::latent_unet {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

dm::UnetConfig latent_unet_config(const Config& c) {
  dm::UnetConfig u{c.get_int("latent_channels"), dm::latent_side(c), c.get_int("channels"), c.get_int_list("channel_mult"),
                   c.get_int("num_res_blocks"), c.get_int_list("attention_resolutions"), c.get_double("dropout"),
                   c.get_int("num_classes")};
  u.transformer_heads = c.get_int("transformer_heads");
  u.transformer_head_dim = c.get_int("transformer_head_dim");
  u.transformer_depth = c.get_int("transformer_depth");
  u.context_dim = c.get_int("context_dim");
  return u;
}

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
      : networks_(std::make_shared<LatentNetworks>(dm::autoencoder_config(c), latent_unet_config(c))),
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
  using V = std::vector<std::int64_t>;
  Schema schema =
      Schema{}
          .add(Key::integer("channels").at_least(4).defaults(64).doc("UNet base channels (DP-LDM's MNIST LDM: 64)"))
          .add(Key::integer_list("channel_mult").at_least(1).defaults(ConfigValue{V{1, 2}})
                   .doc("UNet channel multiplier per latent resolution level (DP-LDM: [1, 2])"))
          .add(Key::integer("num_res_blocks").at_least(1).defaults(1).doc("UNet residual blocks per level (DP-LDM: 1)"))
          .add(Key::integer_list("attention_resolutions").at_least(1).defaults(ConfigValue{V{14, 7}})
                   .doc("latent resolutions with a SpatialTransformer (and one in the middle); DP-LDM: both levels"))
          .add(Key::integer("transformer_heads").at_least(1).defaults(2).doc("attention heads (DP-LDM: 2)"))
          .add(Key::integer("transformer_head_dim").at_least(0).defaults(0)
                   .doc("width of a head; 0: the block's channels / heads (LDM's num_head_channels = -1)"))
          .add(Key::integer("transformer_depth").at_least(1).defaults(1).doc("transformer blocks per SpatialTransformer"))
          .add(Key::integer("context_dim").at_least(0).defaults(0)
                   .doc("width of the class embedding the transformers cross-attend to; 0: 4 x channels"))
          .add(Key::number("dropout").at_least(0).less_than(1).defaults(0.0).doc("dropout in residual blocks"))
          .add(Key::integer("num_classes").at_least(1).defaults(10).doc("classes for conditioning"))
          .add(Key::string("preconditioning").one_of({"edm", "vp", "ve", "v"}).defaults("edm")
                   .doc("diffusion parameterisation in latent space (sigma_data = 1: scaled latents)"))
          .add(Key::number("label_dropout").at_least(0).less_than(1).defaults(0.1)
                   .doc("probability of training with the null label (classifier-free guidance), per example"))
          .add(Key::integer("image_size").at_least(4).defaults(28).doc("image height and width"))
          .add(Key::integer("image_channels").at_least(1).defaults(1).doc("image channels"));
  dm::add_autoencoder_keys(schema);
  registrar->add<LatentUnet>("latent_unet",
                             "latent diffusion (DP-LDM): KL autoencoder + UNet with SpatialTransformers cross-attending "
                             "to the class",
                             std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::latent_unet

PRIVDIFF_PLUGIN("latent_unet", "0.1.0", "latent diffusion model (DP-LDM)", privdiff::plugins::latent_unet::register_components)
