// compvis_ldm: a CompVis latent diffusion model (the kind DP-LDM pretrains and fine-tunes) under
// CompVis's own parameter names: the KL autoencoder (first_stage_model), the UNet
// (model.diffusion_model) and the class embedder whose output the UNet cross-attends to
// (cond_stage_model) — or, in txt2img's layout, CompVis's BERTEmbedder over the captions, tokenized
// by the user's vocab.txt as CompVis's BERTTokenizer does (77 tokens) — their architecture from the
// checkpoint's config ("ldm.config", kept by scripts/convert_to_safetensors.py --ldm-config), trained
// on DDPM's discrete timesteps with the checkpoint's noise schedule (the "discrete" objective). The
// autoencoder stays frozen; the denoising loss runs on its scaled posterior means.
#include <privdiff/components/model.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/diffusion/compvis_ldm.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text/wordpiece_tokenizer.hpp>
#include <privdiff/text_encoders/caption_tokens.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <optional>
#include <stdexcept>

namespace privdiff::plugins::compvis_ldm {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

namespace {

// The LDM config: a config.json (privdiff weights import writes one), or the "ldm.config" metadata
// of a converted checkpoint.
dm::CompVisLdmConfig read_config(const std::string& path) {
  const std::filesystem::path file(path);
  if (!std::filesystem::is_regular_file(file)) throw std::invalid_argument("config: no file " + path);
  if (file.extension() == ".safetensors") {
    const SafetensorsFile weights(file);
    const auto it = weights.metadata().find("ldm.config");
    if (it == weights.metadata().end()) {
      throw std::invalid_argument("config: " + path + " has no ldm.config metadata (convert the checkpoint with "
                                  "scripts/convert_to_safetensors.py --ldm-config CONFIG.yaml)");
    }
    return dm::compvis_ldm_config(it->second, path + " (ldm.config)");
  }
  return dm::compvis_ldm_config(read_file(file), path);
}

}  // namespace

class CompVisLdm : public Model {
 public:
  explicit CompVisLdm(const Config& c)
      : config_(read_config(c.get_string("config"))),
        caption_dropout_(c.get_double("caption_dropout")),
        networks_(std::make_shared<dm::CompVisLatentDiffusion>(config_)),
        preconditioning_(dm::Preconditioning::discrete(dm::compvis_alphas_cumprod(config_))) {
    if (config_.text) tokenizer_ = text_tokenizer(c, *config_.text);
    if (!config_.text && !c.get_string("tokenizer").empty()) {
      throw KeyValueError(c.path() + ".tokenizer", "set, but the LDM's conditioning stage is not a text encoder");
    }
    if (c.get_int("num_classes") != config_.classes) {
      throw std::invalid_argument("num_classes: " + std::to_string(c.get_int("num_classes")) + ", but the LDM's class "
                                  "embedder has " + std::to_string(config_.classes) + " (set num_classes = " +
                                  std::to_string(config_.classes) + ")");
    }
    for (const auto& p : networks_->autoencoder->parameters()) p.set_requires_grad(false);
    const auto& a = config_.autoencoder;
    const std::int64_t size = c.get_int("image_size") > 0 ? c.get_int("image_size") : a.resolution;
    const std::int64_t factor = std::int64_t{1} << (a.ch_mult.size() - 1);
    if (size % factor != 0) {
      throw std::invalid_argument("image_size: " + std::to_string(size) + " is not divisible by the autoencoder's " +
                                  std::to_string(factor) + "x downsampling");
    }
    image_shape_ = {a.in_channels, size, size};
    latent_shape_ = {a.embed_dim, size / factor, size / factor};
  }

  torch::nn::Module& module() override { return *networks_; }
  bool conditions_on_text() const override { return config_.text.has_value(); }

  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    if (config_.text) return dm::denoise(text_network(token_ids(cond.captions, x.size(0))), preconditioning_, x, sigma, {});
    return dm::denoise(network(), preconditioning_, x, sigma, dm::network_labels(cond.labels, config_.classes));
  }

  at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond, std::int64_t k,
                           at::Generator& generator) override {
    for (const auto& p : networks_->autoencoder->parameters()) {
      if (p.requires_grad()) {
        throw std::runtime_error("compvis_ldm: its KL autoencoder does not train here (LDM's perceptual and adversarial "
                                 "loss is not ported): train the UNet (train = \"all\", \"attention\", ...)");
      }
    }
    if (config_.text) {  // each example's caption, "" with probability caption_dropout, for its K rows
      const auto captions = text_encoders::captions_with_dropout(cond, images.size(0), caption_dropout_, generator);
      const at::Tensor rows = token_ids(captions, images.size(0)).repeat_interleave(k, 0);
      return dm::denoising_loss(text_network(rows), preconditioning_, encode(images), {}, {k, 0.0, 0}, generator);
    }
    // No label dropout: LDM's class embedder has no null class.
    return dm::denoising_loss(network(), preconditioning_, encode(images), cond.labels, {k, 0.0, config_.classes}, generator);
  }

  std::vector<ParameterInfo> parameters_with_roles() override {
    const std::string unet_prefix = "model.diffusion_model.";
    const auto& roles = networks_->unet->roles();
    std::vector<ParameterInfo> out;
    for (const auto& p : networks_->named_parameters()) {
      ParameterInfo info{p.key(), "io", -1, p.value()};
      if (p.key().rfind("first_stage_model.", 0) == 0) info.role = "autoencoder";
      else if (p.key().rfind("cond_stage_model.", 0) == 0) info.role = "conditioning";
      for (const auto& r : roles) {
        if (p.key().rfind(unet_prefix + r.prefix, 0) == 0) info.role = r.role, info.block_index = r.block;
      }
      out.push_back(info);
    }
    return out;
  }

  std::vector<std::int64_t> sample_shape() const override { return latent_shape_; }
  std::vector<std::int64_t> image_shape() const override { return image_shape_; }

  at::Tensor encode(const at::Tensor& images) override {  // the posterior mean, scaled (no gradient)
    torch::NoGradGuard no_grad;
    return networks_->autoencoder->encode(images).first * networks_->scale_factor;
  }
  at::Tensor decode(const at::Tensor& latents) override {
    torch::NoGradGuard no_grad;
    return networks_->autoencoder->decode(latents / networks_->scale_factor).clamp(-1, 1);
  }

 private:
  dm::Network network() {
    return [this](const at::Tensor& x, const at::Tensor& t, const at::Tensor& labels) {
      at::Tensor context;
      if (networks_->class_embedding) {
        if (!labels.defined() || (labels == config_.classes).any().item<bool>()) {
          throw std::invalid_argument("compvis_ldm: the model's class embedder has no null class (classifier-free "
                                      "guidance needs one): sample with labels and guidance = 0");
        }
        context = networks_->class_embedding->forward(labels).unsqueeze(1);
      }
      return networks_->unet->forward(x, t, context);
    };
  }

  // The user's vocab.txt for the BERTEmbedder, refused by key when absent or of another size than its
  // cond_stage_config.params.vocab_size.
  static WordPieceTokenizer text_tokenizer(const Config& c, const text_encoders::CompVisBertConfig& text) {
    return text_encoders::caption_vocabulary(c, "tokenizer", text.max_seq_len, "the BERTEmbedder", text.vocab_size);
  }

  at::Tensor token_ids(const std::vector<std::string>& captions, std::int64_t n) const {
    return text_encoders::caption_token_ids(*tokenizer_, captions, n, networks_->scale_factor.device(), "compvis_ldm");
  }

  // The UNet attending to the BERTEmbedder's embeddings of `ids` (one row per network row).
  dm::Network text_network(at::Tensor ids) {
    return [this, ids](const at::Tensor& x, const at::Tensor& t, const at::Tensor&) {
      return networks_->unet->forward(x, t, networks_->text_encoder->forward(ids));
    };
  }

  dm::CompVisLdmConfig config_;
  std::optional<WordPieceTokenizer> tokenizer_;
  double caption_dropout_ = 0;
  std::shared_ptr<dm::CompVisLatentDiffusion> networks_;
  dm::Preconditioning preconditioning_;
  std::vector<std::int64_t> image_shape_, latent_shape_;
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  schema.add(Key::string("config").doc("the LDM's config: a config.json (privdiff weights import writes it) or a "
                                       "checkpoint converted with --ldm-config (its ldm.config metadata)"))
      .add(Key::integer("image_size").at_least(0).defaults(0).doc("image height and width; 0: the autoencoder's resolution"))
      .add(Key::integer("num_classes").at_least(0).defaults(0)
               .doc("classes for conditioning: must equal the class embedder's n_classes (0: unconditional or text)"))
      .add(Key::string("tokenizer").defaults("")
               .doc("a text-conditioned LDM (BERTEmbedder): the vocab.txt its captions are tokenized with "
                    "(bert-base-uncased's, as CompVis's BERTTokenizer; 77 tokens)"))
      .add(Key::number("caption_dropout").at_least(0).at_most(1).defaults(0.1)
               .doc("a text-conditioned LDM: the probability that an example trains on the empty caption "
                    "(classifier-free guidance's unconditional branch), drawn per example"));
  registrar->add<CompVisLdm>("compvis_ldm",
                             "CompVis latent diffusion (DP-LDM's kind): KL autoencoder + UNet, its names and "
                             "architecture from the checkpoint, DDPM's discrete schedule",
                             std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::compvis_ldm

PRIVDIFF_PLUGIN("compvis_ldm", "0.1.0", "CompVis latent diffusion model", privdiff::plugins::compvis_ldm::register_components)
