// dpdm_ncsnpp: DPDM's own network (the SDK's port of NCSN++ as DPDM configures it,
// diffusion/ncsnpp.hpp) under DPDM's parameter names, so that DPDM's published checkpoints
// (converted by scripts/convert_to_safetensors.py --dpdm) are sampled, evaluated or fine-tuned
// with [run] init_from. DPDM trains it under EDM preconditioning with sigma_data = sqrt(1/3), the
// default here; the recipe keys mean what they mean for pixel_unet.
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/ncsnpp.hpp>
#include <privdiff/diffusion/unet_recipe.hpp>
#include <privdiff/plugin/export.hpp>

namespace privdiff::plugins::dpdm_ncsnpp {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

namespace {

dm::NcsnppConfig ncsnpp_config(const Config& c) {
  dm::NcsnppConfig n;
  n.image_size = c.get_int("image_size");
  n.in_channels = n.out_channels = c.get_int("image_channels");
  n.nf = c.get_int("channels");
  n.ch_mult = c.get_int_list("channel_mult");
  n.num_res_blocks = c.get_int("num_res_blocks");
  n.attn_resolutions = c.get_int_list("attention_resolutions");
  n.label_dim = c.get_int("num_classes");
  n.dropout = c.get_double("dropout");
  return n;
}

}  // namespace

class DpdmNcsnpp : public Model {
 public:
  explicit DpdmNcsnpp(const Config& c)
      : network_(std::make_shared<dm::Ncsnpp>(ncsnpp_config(c))),
        preconditioning_(dm::parameterization_from_string(c.get_string("preconditioning"))),
        label_dropout_(c.get_double("label_dropout")) {}

  torch::nn::Module& module() override { return *network_; }

  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    return dm::denoise(network(), preconditioning_, x, sigma, dm::network_labels(cond.labels, classes()));
  }

  at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond, std::int64_t k,
                           at::Generator& generator) override {
    return dm::denoising_loss(network(), preconditioning_, images, cond.labels, {k, label_dropout_, classes()}, generator);
  }

  // Roles by module: the residual and attention blocks numbered in forward order, the class
  // embedding, the noise-level embedding's dense layers, and the input and output layers.
  std::vector<ParameterInfo> parameters_with_roles() override {
    const auto& blocks = network_->blocks();
    const std::int64_t first_dense = classes() > 0 ? 1 : 0;
    std::vector<ParameterInfo> out;
    for (const auto& p : network_->named_parameters()) {
      const std::string& name = p.key();  // all_modules.N.…
      const auto dot = name.find('.', 12);
      const std::int64_t module = std::stoll(name.substr(12, dot - 12));
      ParameterInfo info{name, "io", -1, p.value()};
      if (module < first_dense) info.role = "conditioning";
      else if (module < first_dense + 2) info.role = "embedding";
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        if (blocks[b].module == module) {
          info.role = blocks[b].attention ? "attention" : "resblock";
          info.block_index = static_cast<int>(b);
        }
      }
      out.push_back(info);
    }
    return out;
  }

  std::vector<std::int64_t> sample_shape() const override {
    const auto& c = network_->config();
    return {c.in_channels, c.image_size, c.image_size};
  }

 private:
  std::int64_t classes() const { return network_->config().label_dim; }
  dm::Network network() {
    return [this](const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels) {
      return network_->forward(x, c_noise, labels);
    };
  }

  std::shared_ptr<dm::Ncsnpp> network_;
  dm::Preconditioning preconditioning_;
  double label_dropout_;
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  dm::add_unet_keys(schema, {{32, "nf, the base channels (DPDM: 32)"},
                             {{1, 2, 2}, "ch_mult, the channel multiplier per resolution level (DPDM: 1, 2, 2)"},
                             {2, "residual blocks per level (DPDM: 2)"},
                             {{7}, "attn_resolutions (DPDM: 7 at 28 x 28, 16 at 32 x 32)"},
                             0, "label_dim, classes for conditioning (plus a null class); 0 = unconditional",
                             "diffusion parameterisation; DPDM's checkpoints are edm"});
  registrar->add<DpdmNcsnpp>("dpdm_ncsnpp",
                             "DPDM's network (NCSN++ as DPDM configures it, its parameter names): runs DPDM's checkpoints",
                             std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::dpdm_ncsnpp

PRIVDIFF_PLUGIN("dpdm_ncsnpp", "0.1.0", "DPDM's NCSN++ network", privdiff::plugins::dpdm_ncsnpp::register_components)
