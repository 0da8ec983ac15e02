// pixel_unet: a pixel-space diffusion model: the SDK's DDPM++-style UNet under one of DPDM's four
// preconditionings (edm, vp, ve, v), trained with the noise-multiplicity denoising loss.
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/diffusion/unet_recipe.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::pixel_unet {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class PixelUnet : public Model {
 public:
  explicit PixelUnet(const Config& c)
      : unet_(std::make_shared<dm::Unet>(dm::unet_config(c, c.get_int("image_channels"), c.get_int("image_size")))),
        preconditioning_(dm::parameterization_from_string(c.get_string("preconditioning"))),
        label_dropout_(c.get_double("label_dropout")) {
  }

  torch::nn::Module& module() override { return *unet_; }

  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    return dm::denoise(dm::as_network(*unet_), preconditioning_, x, sigma,
                       dm::network_labels(cond.labels, unet_->config().num_classes));
  }

  at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond, std::int64_t k,
                           at::Generator& generator) override {
    return dm::denoising_loss(dm::as_network(*unet_), preconditioning_, images, cond.labels,
                              {k, label_dropout_, unet_->config().num_classes}, generator);
  }

  std::vector<ParameterInfo> parameters_with_roles() override { return unet_->parameters_with_roles(); }
  std::vector<std::int64_t> sample_shape() const override {
    const auto& c = unet_->config();
    return {c.image_channels, c.image_size, c.image_size};
  }

 private:
  std::shared_ptr<dm::Unet> unet_;
  dm::Preconditioning preconditioning_;
  double label_dropout_;
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  dm::add_unet_keys(schema, {{32, "base channels (DPDM: 32)"},
                             {{1, 2, 2}, "channel multiplier per resolution level"},
                             {2, "residual blocks per level"},
                             {{7}, "resolutions with self-attention"},
                             0, "classes for conditioning; 0 = unconditional",
                             "diffusion parameterisation (DPDM Table 7)"});
  registrar->add<PixelUnet>("pixel_unet", "pixel-space diffusion UNet (DDPM++-style) under EDM, VP, VE or v-prediction",
                            std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::pixel_unet

PRIVDIFF_PLUGIN("pixel_unet", "0.1.0", "pixel-space diffusion UNet", privdiff::plugins::pixel_unet::register_components)
