// autoencoder: LDM's KL autoencoder on its own, trained by its objective (reconstruction + KL) on
// public data. A latent_unet run reuses it by run directory (run.init_from): its weights and fitted
// scale factor become the latent model's frozen autoencoder. It is not a diffusion model: it has
// no denoiser, so its recipes have no [sampler].
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/autoencoder.hpp>
#include <privdiff/diffusion/autoencoder_recipe.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <stdexcept>

namespace privdiff::plugins::autoencoder {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class AutoencoderModel : public Model {
 public:
  explicit AutoencoderModel(const Config& c)
      : autoencoder_(std::make_shared<dm::Autoencoder>(dm::autoencoder_config(c))),
        latent_side_(dm::latent_side(c)),
        image_shape_(dm::image_shape(c)) {}

  torch::nn::Module& module() override { return *autoencoder_; }

  at::Tensor denoise(const at::Tensor&, const at::Tensor&, const Conditioning&) override {
    throw std::logic_error("autoencoder: not a diffusion model (no denoiser); sample from a latent_unet that uses it");
  }

  at::Tensor training_loss(const at::Tensor& images, const Conditioning&, std::int64_t k,
                           at::Generator& generator) override {  // K rows per example: K posterior draws
    return autoencoder_->loss(k == 1 ? images : images.repeat_interleave(k, 0), generator);
  }

  std::vector<ParameterInfo> parameters_with_roles() override {
    std::vector<ParameterInfo> out;
    for (const auto& p : autoencoder_->named_parameters()) out.push_back({p.key(), "autoencoder", -1, p.value()});
    return out;
  }

  std::vector<std::int64_t> sample_shape() const override {
    return {autoencoder_->config().latent_channels, latent_side_, latent_side_};
  }
  std::vector<std::int64_t> image_shape() const override { return image_shape_; }

  at::Tensor encode(const at::Tensor& images) override {
    torch::NoGradGuard no_grad;
    return autoencoder_->encode(images).mean * autoencoder_->scale_factor();
  }
  at::Tensor decode(const at::Tensor& latents) override {
    torch::NoGradGuard no_grad;
    return autoencoder_->decode(latents / autoencoder_->scale_factor()).clamp(-1, 1);
  }

  std::vector<StageFigure> after_public_stage(const Dataset& data) override {
    return {dm::fit_autoencoder(*autoencoder_, data)};
  }

 private:
  std::shared_ptr<dm::Autoencoder> autoencoder_;
  std::int64_t latent_side_;
  std::vector<std::int64_t> image_shape_;
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema = Schema{}
                      .add(Key::integer("image_size").at_least(4).defaults(28).doc("image height and width"))
                      .add(Key::integer("image_channels").at_least(1).defaults(1).doc("image channels"));
  dm::add_autoencoder_keys(schema);
  registrar->add<AutoencoderModel>("autoencoder",
                                   "KL-regularised autoencoder of latent diffusion (reconstruction + KL), for latent_unet",
                                   std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::autoencoder

PRIVDIFF_PLUGIN("autoencoder", "0.1.0", "KL autoencoder for latent diffusion", privdiff::plugins::autoencoder::register_components)
