#include <privdiff/diffusion/autoencoder_recipe.hpp>

#include <privdiff/components/dataset.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/device.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::diffusion {

Schema& add_autoencoder_keys(Schema& schema) {
  using V = std::vector<std::int64_t>;
  return schema
      .add(Key::integer("autoencoder_channels").at_least(4).defaults(32).doc("autoencoder base channels"))
      .add(Key::integer_list("autoencoder_channel_mult").at_least(1).defaults(ConfigValue{V{1, 2}})
               .doc("autoencoder channel multiplier per level; downsampling factor 2^(levels - 1): [1, 2] -> 28x28 "
                    "images become 14x14 latents, [1, 2, 2] -> 7x7"))
      .add(Key::integer("autoencoder_res_blocks").at_least(1).defaults(1).doc("autoencoder residual blocks per level"))
      .add(Key::integer("latent_channels").at_least(1).defaults(3).doc("latent channels (DP-LDM's autoencoders: 3)"))
      .add(Key::string("reconstruction").one_of({"l1", "l2"}).defaults("l1")
               .doc("reconstruction term of the autoencoder objective, summed over pixels (LDM: l1)"))
      .add(Key::number("kl_weight").at_least(0).defaults(1e-6)
               .doc("weight of the KL term against the summed reconstruction error (LDM's KL autoencoders: 1e-6)"));
}

AutoencoderConfig autoencoder_config(const Config& c) {
  AutoencoderConfig a;
  a.image_channels = c.get_int("image_channels");
  a.channels = c.get_int("autoencoder_channels");
  a.channel_mult = c.get_int_list("autoencoder_channel_mult");
  a.num_res_blocks = c.get_int("autoencoder_res_blocks");
  a.latent_channels = c.get_int("latent_channels");
  a.reconstruction = c.get_string("reconstruction");
  a.kl_weight = c.get_double("kl_weight");
  return a;
}

std::vector<std::int64_t> image_shape(const Config& c) {
  return {c.get_int("image_channels"), c.get_int("image_size"), c.get_int("image_size")};
}

std::int64_t latent_side(const Config& c) {
  const std::int64_t size = c.get_int("image_size");
  const std::int64_t f = downsampling_factor(autoencoder_config(c));
  if (size % f != 0) {
    throw KeyValueError(c.path() + ".image_size", std::to_string(size) + " is not divisible by the "
                                "autoencoder's downsampling factor " + std::to_string(f) +
                                " (2^(levels of autoencoder_channel_mult - 1))");
  }
  return size / f;
}

bool is_trainable(torch::nn::Module& module) {
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) return true;
  }
  return false;
}

StageFigure fit_autoencoder(Autoencoder& autoencoder, const Dataset& data, std::int64_t max_examples) {
  const bool training = autoencoder.is_training();
  autoencoder.eval();
  const c10::Device device = engine::module_device(autoencoder);
  // Evenly spaced examples, so that a dataset stored class by class is still represented whole.
  auto spread = [&](std::int64_t count) {
    return at::linspace(0, static_cast<double>(data.size() - 1), count, at::kDouble).round().to(at::kLong);
  };
  const at::Tensor observed = spread(std::min(data.size(), max_examples));
  autoencoder.reset_latent_statistics();
  for (std::int64_t first = 0; first < observed.numel(); first += 256) {
    autoencoder.observe_latents(data.images(observed.slice(0, first, first + 256)).to(device));
  }
  const std::int64_t n = data.size();
  const std::int64_t shown = n >= 20 ? 20 : n >= 10 ? 10 : n;  // whole rows of 10 (or one short row)
  StageFigure figure{"reconstructions", {}, std::min<std::int64_t>(10, shown)};
  if (shown > 0) {
    torch::NoGradGuard no_grad;
    const at::Tensor originals = data.images(spread(shown)).to(device);
    const at::Tensor reconstructions = autoencoder.decode(autoencoder.encode(originals).mean).clamp(-1, 1);
    std::vector<at::Tensor> rows;  // originals over reconstructions
    for (std::int64_t first = 0; first < shown; first += figure.columns) {
      const std::int64_t last = std::min(shown, first + figure.columns);
      rows.push_back(originals.slice(0, first, last));
      rows.push_back(reconstructions.slice(0, first, last));
    }
    figure.images = at::cat(rows).cpu();
  }
  autoencoder.train(training);
  return figure;
}

}  // namespace privdiff::sdk::diffusion
