#pragma once
/// @file
/// What the `autoencoder` and `latent_unet` models share about their KL autoencoder: the recipe
/// keys (the same names in both, so an autoencoder run's [model] keys carry over to the latent
/// model that reuses it) and what happens after a stage trained it on public data — LDM's scale
/// factor is fitted and a reconstruction grid is shown.

#include <privdiff/components/model.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/diffusion/autoencoder.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <vector>

namespace privdiff::sdk::diffusion {

/// Adds autoencoder_channels, autoencoder_channel_mult, autoencoder_res_blocks, latent_channels,
/// reconstruction and kl_weight (image_channels is the model's own key).
PRIVDIFF_SDK_API Schema& add_autoencoder_keys(Schema& schema);
/// Reads them (image_channels from the same section).
PRIVDIFF_SDK_API AutoencoderConfig autoencoder_config(const Config& config);

/// The side of the latents of `image_size` images (image_size / downsampling factor); throws
/// std::invalid_argument naming `<section>.image_size` when the factor does not divide it.
PRIVDIFF_SDK_API std::int64_t latent_side(const Config& config);

/// The shape [image_channels, image_size, image_size] of the images a latent model trains on
/// (Model::image_shape of both autoencoder models).
PRIVDIFF_SDK_API std::vector<std::int64_t> image_shape(const Config& config);

/// True when any parameter of `autoencoder` has requires_grad set (the stage trains it).
PRIVDIFF_SDK_API bool is_trainable(torch::nn::Module& module);

/// After the autoencoder has trained on `data` (public or a DP release, never private data: the
/// statistics are not noised): fits its scale factor on `max_examples` evenly spaced examples (all, for
/// a smaller dataset; in batches) and returns a figure of 20 evenly spaced examples, rows of 10
/// originals over their reconstructions.
PRIVDIFF_SDK_API StageFigure fit_autoencoder(Autoencoder& autoencoder, const Dataset& data,
                                             std::int64_t max_examples = 10000);

}  // namespace privdiff::sdk::diffusion
