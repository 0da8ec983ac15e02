// latent_unet: DP-LDM's latent diffusion model — a KL autoencoder and, in its latent space, an LDM
// UNet whose attention blocks are SpatialTransformers cross-attending to the class embedding, or
// (text_encoder_layers > 0) to the caption's embeddings by a text encoder of CompVis's BERTEmbedder
// layout trained with it, as CompVis trains its txt2img LDM's from scratch.
// What a stage trains decides the objective: a stage with train = "autoencoder" trains the
// autoencoder by its own loss (and, when its data is public, fits LDM's scale factor); every other
// stage trains the UNet on the frozen autoencoder's scaled latents with the denoising loss.
#include <privdiff/components/model.hpp>
#include <privdiff/diffusion/autoencoder.hpp>
#include <privdiff/diffusion/autoencoder_recipe.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/diffusion/unet_recipe.hpp>
#include <privdiff/engine/device.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text_encoders/caption_tokens.hpp>
#include <privdiff/text_encoders/compvis_bert_embedder.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <optional>
#include <stdexcept>

namespace privdiff::plugins::latent_unet {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

// The module tree: "autoencoder.*", "unet.*" and, on text, "text_encoder.*" (what checkpoints and
// init_from see).
struct LatentNetworks : torch::nn::Module {
  LatentNetworks(const dm::AutoencoderConfig& a, const dm::UnetConfig& u,
                 const std::optional<text_encoders::CompVisBertConfig>& text)
      : autoencoder(register_module("autoencoder", std::make_shared<dm::Autoencoder>(a))),
        unet(register_module("unet", std::make_shared<dm::Unet>(u))) {
    if (text) text_encoder = register_module("text_encoder", std::make_shared<text_encoders::CompVisBertEmbedder>(*text));
  }
  std::shared_ptr<dm::Autoencoder> autoencoder;
  std::shared_ptr<dm::Unet> unet;
  std::shared_ptr<text_encoders::CompVisBertEmbedder> text_encoder;  ///< null unless text_encoder_layers > 0
};

// text_encoder_layers > 0: the vocabulary (refused at its key) and the UNet on text (num_classes = 0).
std::optional<WordPieceTokenizer> text_vocabulary(const Config& c) {
  if (c.get_int("text_encoder_layers") == 0) return std::nullopt;
  if (c.get_int("num_classes") != 0) {
    throw KeyValueError(c.path() + ".num_classes", "a latent UNet on text (text_encoder_layers > 0) has no classes: "
                                                   "set num_classes = 0 (the captions say what to draw)");
  }
  return text_encoders::caption_vocabulary(c, "tokenizer", c.get_int("caption_tokens"), "the text encoder");
}

dm::UnetConfig unet_on(const Config& c, bool text) {
  dm::UnetConfig u = dm::unet_config(c, c.get_int("latent_channels"), dm::latent_side(c));
  u.text_context = text;
  if (text && u.context_dim <= 0) u.context_dim = 4 * u.channels;  // the Unet's default width, given to the encoder
  return u;
}

// The text encoder: CompVis's BERTEmbedder layout, as wide as the transformers' context.
std::optional<text_encoders::CompVisBertConfig> text_config(const Config& c, const std::optional<WordPieceTokenizer>& vocab,
                                                            std::int64_t width) {
  if (!vocab) return std::nullopt;
  text_encoders::CompVisBertConfig t;
  t.vocab_size = static_cast<std::int64_t>(vocab->vocabulary_size());
  t.width = width;
  t.layers = c.get_int("text_encoder_layers");
  t.max_seq_len = c.get_int("caption_tokens");
  t.heads = c.get_int("text_encoder_heads");
  if (width % t.heads != 0) {
    throw KeyValueError(c.path() + ".text_encoder_heads", std::to_string(t.heads) + " heads do not divide the text "
                                                          "encoder's width " + std::to_string(width) + " (context_dim)");
  }
  t.head_dim = width / t.heads;
  return t;
}

// The networks: the autoencoder, the UNet (on text when there is a vocabulary) and its text encoder.
std::shared_ptr<LatentNetworks> latent_networks(const Config& c, const std::optional<WordPieceTokenizer>& vocab) {
  const dm::UnetConfig unet = unet_on(c, vocab.has_value());
  return std::make_shared<LatentNetworks>(dm::autoencoder_config(c), unet, text_config(c, vocab, unet.context_dim));
}

class LatentUnet : public Model {
 public:
  explicit LatentUnet(const Config& c)
      : tokenizer_(text_vocabulary(c)),
        networks_(latent_networks(c, tokenizer_)),
        // Scaled latents have unit variance (LDM's scale factor), so sigma_data = 1.
        preconditioning_(dm::parameterization_from_string(c.get_string("preconditioning")), 1.0),
        label_dropout_(c.get_double("label_dropout")),
        caption_dropout_(c.get_double("caption_dropout")),
        image_shape_(dm::image_shape(c)) {
    if (!tokenizer_ && !c.get_string("tokenizer").empty()) {
      throw KeyValueError(c.path() + ".tokenizer", "set, but the model has no text encoder (text_encoder_layers = 0)");
    }
  }

  bool conditions_on_text() const override { return tokenizer_.has_value(); }

  torch::nn::Module& module() override { return *networks_; }

  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    if (tokenizer_) return dm::denoise(text_network(token_ids(cond.captions, x.size(0))), preconditioning_, x, sigma, {});
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
    if (tokenizer_) {  // each example's caption ("" with probability caption_dropout) for its K rows
      const auto captions = text_encoders::captions_with_dropout(cond, images.size(0), caption_dropout_, generator);
      const at::Tensor rows = token_ids(captions, images.size(0)).repeat_interleave(k, 0);
      return dm::denoising_loss(text_network(rows), preconditioning_, encode(images), {}, {k, 0.0, 0}, generator);
    }
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
    if (networks_->text_encoder) {  // what the captions condition through, as the class embedding
      for (const auto& p : networks_->text_encoder->named_parameters()) {
        out.push_back({"text_encoder." + p.key(), "conditioning", -1, p.value()});
      }
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
  at::Tensor token_ids(const std::vector<std::string>& captions, std::int64_t n) const {
    return text_encoders::caption_token_ids(*tokenizer_, captions, n, engine::module_device(*networks_), "latent_unet");
  }
  // The UNet attending to the text encoder's embeddings of `ids` (one row per network row).
  dm::Network text_network(at::Tensor ids) {
    return [this, ids](const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels) {
      return unet().forward(x, c_noise, labels, networks_->text_encoder->forward(ids));
    };
  }
  std::optional<WordPieceTokenizer> tokenizer_;
  std::shared_ptr<LatentNetworks> networks_;
  dm::Preconditioning preconditioning_;
  double label_dropout_, caption_dropout_;
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
                             0, "classes for conditioning (0 with a text encoder: the captions condition)",
                             "diffusion parameterisation in latent space (sigma_data = 1: scaled latents)",
                             /*spatial_transformers=*/true});
  dm::add_autoencoder_keys(schema);
  schema.add(Key::integer("text_encoder_layers").at_least(0).defaults(0)
                 .doc("0: the transformers cross-attend to the class; > 0: to the caption, through a text encoder "
                      "of CompVis's BERTEmbedder layout with this many layers, as wide as context_dim, trained with "
                      "the UNet (num_classes = 0; captioned data, docs/captions.md)"))
      .add(Key::string("tokenizer").defaults("").doc("text_encoder_layers > 0: the vocab.txt its captions are "
                                                     "tokenized with (WordPiece, lower case)"))
      .add(Key::integer("caption_tokens").at_least(3).at_most(512).defaults(77)
               .doc("text_encoder_layers > 0: tokens a caption is padded or cut to, start and end included (CompVis: 77)"))
      .add(Key::integer("text_encoder_heads").at_least(1).defaults(2).doc("text_encoder_layers > 0: its attention heads"))
      .add(Key::number("caption_dropout").at_least(0).at_most(1).defaults(0.1)
               .doc("text_encoder_layers > 0: the probability that an example trains on the empty caption (the "
                    "unconditional branch of classifier-free guidance)"));
  registrar->add<LatentUnet>("latent_unet",
                             "latent diffusion (DP-LDM): KL autoencoder + UNet with SpatialTransformers cross-attending "
                             "to the class, or to the caption through its text encoder",
                             std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::latent_unet

PRIVDIFF_PLUGIN("latent_unet", "0.1.0", "latent diffusion model (DP-LDM)", privdiff::plugins::latent_unet::register_components)
