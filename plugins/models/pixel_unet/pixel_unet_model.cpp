// pixel_unet: a pixel-space diffusion model: the SDK's DDPM++-style UNet under one of DPDM's four
// preconditionings (edm, vp, ve, v), trained with the noise-multiplicity denoising loss.
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::pixel_unet {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

class PixelUnet : public Model {
 public:
  explicit PixelUnet(const Config& c)
      : unet_(std::make_shared<dm::Unet>(dm::UnetConfig{c.get_int("image_channels"), c.get_int("image_size"),
                                                        c.get_int("channels"), c.get_int_list("channel_mult"),
                                                        c.get_int("num_res_blocks"), c.get_int_list("attention_resolutions"),
                                                        c.get_double("dropout"), c.get_int("num_classes")})),
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
  using V = std::vector<std::int64_t>;
  Schema schema =
      Schema{}
          .add(Key::integer("channels").at_least(4).defaults(32).doc("base channels (DPDM: 32)"))
          .add(Key::integer_list("channel_mult").at_least(1).defaults(ConfigValue{V{1, 2, 2}}).doc("channel multiplier per resolution level"))
          .add(Key::integer("num_res_blocks").at_least(1).defaults(2).doc("residual blocks per level"))
          .add(Key::integer_list("attention_resolutions").at_least(1).defaults(ConfigValue{V{7}}).doc("resolutions with self-attention"))
          .add(Key::number("dropout").at_least(0).less_than(1).defaults(0.0).doc("dropout in residual blocks"))
          .add(Key::integer("num_classes").at_least(0).defaults(10).doc("classes for conditioning; 0 = unconditional"))
          .add(Key::string("preconditioning").one_of({"edm", "vp", "ve", "v"}).defaults("edm")
                   .doc("diffusion parameterisation (DPDM Table 7)"))
          .add(Key::number("label_dropout").at_least(0).less_than(1).defaults(0.1)
                   .doc("probability of training with the null label (classifier-free guidance), per example"))
          .add(Key::integer("image_size").at_least(4).defaults(28).doc("image height and width"))
          .add(Key::integer("image_channels").at_least(1).defaults(1).doc("image channels"));
  registrar->add<PixelUnet>("pixel_unet", "pixel-space diffusion UNet (DDPM++-style) under EDM, VP, VE or v-prediction",
                            std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::pixel_unet

PRIVDIFF_PLUGIN("pixel_unet", "0.1.0", "pixel-space diffusion UNet", privdiff::plugins::pixel_unet::register_components)
