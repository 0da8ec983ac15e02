// diffusers_unet: Hugging Face diffusers' UNet2DModel or UNet2DConditionModel (the SDK's port,
// diffusion/diffusers_unet.hpp) as a privdiff model, its architecture read from the model's
// config.json, so that a published diffusers UNet is fine-tuned under DP with its own weights ([run]
// init_from its diffusion_pytorch_model.safetensors). diffusers trains these as DDPM epsilon-predictors
// on discrete timesteps: the "discrete" objective with its scheduler's betas is exactly that. With
// `autoencoder`, the UNet works in the latent space of a diffusers AutoencoderKL (frozen, read from
// its folder, not part of the model's weights), as diffusers' latent pipelines do. A
// UNet2DConditionModel (Stable Diffusion's) cross-attends to the captions as its pipeline's CLIP text
// encoder reads them (clip_text_side.hpp; frozen, not part of the model's weights either).
#include "clip_text_side.hpp"

#include <privdiff/components/model.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/diffusers_autoencoder.hpp>
#include <privdiff/diffusion/diffusers_unet.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/plugin/export.hpp>
#include <privdiff/text_encoders/caption_tokens.hpp>

#include <filesystem>
#include <optional>
#include <stdexcept>

namespace privdiff::plugins::diffusers_unet {

using namespace privdiff::sdk;
namespace dm = privdiff::sdk::diffusion;

namespace {

dm::DiffusersUNet2DConfig read_config(const std::string& path) {
  std::filesystem::path file(path);
  if (std::filesystem::is_directory(file)) file /= "config.json";
  if (!std::filesystem::is_regular_file(file)) {
    throw std::invalid_argument("config: no diffusers config.json at " + file.string() + " (give the model's folder)");
  }
  return dm::diffusers_unet2d_config(read_file(file), file.string());
}

dm::Preconditioning preconditioning_of(const Config& c) {
  if (c.get_string("preconditioning") != "discrete") return dm::Preconditioning(dm::parameterization_from_string(c.get_string("preconditioning")));
  try {
    return dm::Preconditioning::discrete(dm::ddpm_alphas_cumprod(c.get_string("beta_schedule"), c.get_double("beta_start"),
                                                                 c.get_double("beta_end"), c.get_int("num_train_timesteps")));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("beta_start: ") + e.what());
  }
}

// A diffusers AutoencoderKL folder, its weights loaded and frozen.
std::shared_ptr<dm::DiffusersAutoencoderKL> autoencoder_of(const std::string& folder) {
  if (folder.empty()) return nullptr;
  const std::filesystem::path dir(folder);
  if (!std::filesystem::is_regular_file(dir / "config.json") || !std::filesystem::is_regular_file(dir / "diffusion_pytorch_model.safetensors")) {
    throw std::invalid_argument("autoencoder: " + folder + " is not a diffusers model folder (config.json and "
                                "diffusion_pytorch_model.safetensors)");
  }
  auto ae = std::make_shared<dm::DiffusersAutoencoderKL>(
      dm::diffusers_autoencoder_kl_config(read_file(dir / "config.json"), (dir / "config.json").string()));
  try {
    load_pretrained_weights(dir / "diffusion_pytorch_model.safetensors", *ae);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument("autoencoder: " + std::string(e.what()));
  }
  for (auto& p : ae->parameters()) p.set_requires_grad(false);
  ae->eval();
  return ae;
}

// A UNet2DConditionModel's text side; a UNet2DModel has none, and its text keys are refused.
std::optional<ClipTextSide> text_side_of(const Config& c, const dm::DiffusersUNet2DConfig& unet) {
  if (unet.conditional()) return std::make_optional<ClipTextSide>(c, unet.cross_attention_dim);
  for (const char* key : {"text_encoder", "tokenizer"}) {
    if (!c.get_string(key).empty()) {
      throw KeyValueError(c.path() + "." + key, "set, but the config.json is a UNet2DModel, which reads no text (a "
                                                "UNet2DConditionModel does)");
    }
  }
  return std::nullopt;
}

}  // namespace

class DiffusersUnet : public Model {
 public:
  explicit DiffusersUnet(const Config& c)
      : unet_(std::make_shared<dm::DiffusersUNet2D>(read_config(c.get_string("config")))),
        preconditioning_(preconditioning_of(c)),
        autoencoder_(autoencoder_of(c.get_string("autoencoder"))),
        image_size_(c.get_int("image_size")),
        classes_(c.get_int("num_classes")),
        caption_dropout_(c.get_double("caption_dropout")),
        text_(text_side_of(c, unet_->config())) {
    const auto& config = unet_->config();
    if (autoencoder_ && autoencoder_->config().latent_channels != config.in_channels) {
      throw std::invalid_argument("autoencoder: its latent_channels (" + std::to_string(autoencoder_->config().latent_channels) +
                                  ") differ from the UNet's in_channels (" + std::to_string(config.in_channels) + ")");
    }
    if (classes_ != config.num_class_embeds) {
      throw std::invalid_argument("num_classes: " + std::to_string(classes_) + ", but the config.json has num_class_embeds " +
                                  std::to_string(config.num_class_embeds) + " (set num_classes = " +
                                  std::to_string(config.num_class_embeds) + ")");
    }
    const std::int64_t factor = (std::int64_t{1} << (config.block_out_channels.size() - 1)) * latent_factor();
    if (image_size_ % factor != 0) {
      throw std::invalid_argument("image_size: " + std::to_string(image_size_) + " is not divisible by the model's " +
                                  std::to_string(factor) + "x downsampling");
    }
  }

  torch::nn::Module& module() override { return *unet_; }
  bool conditions_on_text() const override { return text_.has_value(); }

  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    const at::Tensor context = text_ ? text_context(cond.captions, x.size(0)) : at::Tensor();
    return dm::denoise(network(context), preconditioning_, x, sigma, dm::network_labels(cond.labels, classes_));
  }

  at::Tensor training_loss(const at::Tensor& images, const Conditioning& cond, std::int64_t k,
                           at::Generator& generator) override {
    at::Tensor context;
    if (text_) {  // each example's caption, "" with probability caption_dropout, for its K rows
      const auto captions = text_encoders::captions_with_dropout(cond, images.size(0), caption_dropout_, generator);
      context = text_context(captions, images.size(0)).repeat_interleave(k, 0);
    }
    // No label dropout: a diffusers class embedding has no null class for guidance.
    return dm::denoising_loss(network(context), preconditioning_, encode(images), cond.labels, {k, 0.0, classes_}, generator);
  }

  // Roles by diffusers' names: attention blocks (a transformer's cross-attention to the text:
  // cross_attention), residual blocks (with their time projections), the timestep and class embeddings;
  // the level is the block index (down levels, then the middle, then up).
  std::vector<ParameterInfo> parameters_with_roles() override {
    const auto levels = static_cast<int>(unet_->config().block_out_channels.size());
    std::vector<ParameterInfo> out;
    for (const auto& p : unet_->named_parameters()) {
      const std::string& name = p.key();
      ParameterInfo info{name, "io", -1, p.value()};
      auto level_of = [&](const std::string& prefix) { return std::stoi(name.substr(prefix.size())); };
      if (name.rfind("down_blocks.", 0) == 0) info.block_index = level_of("down_blocks.");
      else if (name.rfind("mid_block.", 0) == 0) info.block_index = levels;
      else if (name.rfind("up_blocks.", 0) == 0) info.block_index = levels + 1 + level_of("up_blocks.");
      if (name.find(".attn2.") != std::string::npos) info.role = "cross_attention";  // a transformer's to the text
      else if (name.find(".attentions.") != std::string::npos) info.role = "attention";
      else if (name.find(".resnets.") != std::string::npos) info.role = "resblock";
      else if (name.rfind("time_embedding.", 0) == 0) info.role = "embedding";
      else if (name.rfind("class_embedding.", 0) == 0) info.role = "conditioning";
      out.push_back(info);
    }
    return out;
  }

  std::vector<std::int64_t> sample_shape() const override {
    const std::int64_t side = image_size_ / latent_factor();
    return {unet_->config().in_channels, side, side};
  }
  std::vector<std::int64_t> image_shape() const override {
    if (!autoencoder_) return sample_shape();
    return {autoencoder_->config().in_channels, image_size_, image_size_};
  }
  at::Tensor encode(const at::Tensor& images) override {  // the posterior mean, scaled (no gradient)
    if (!autoencoder_) return images;
    torch::NoGradGuard no_grad;
    return autoencoder_->encode(images.to(device(), unet_->parameters().front().scalar_type())).first * autoencoder_->config().scaling_factor;
  }
  at::Tensor decode(const at::Tensor& latents) override {
    if (!autoencoder_) return latents;
    torch::NoGradGuard no_grad;
    return autoencoder_->decode(latents.to(device(), unet_->parameters().front().scalar_type()) / autoencoder_->config().scaling_factor).clamp(-1, 1);
  }

 private:
  // The UNet, cross-attending to `context` (the text encoder's states, one row per network row) when
  // it is a UNet2DConditionModel.
  dm::Network network(at::Tensor context = {}) {
    return [this, context](const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels) {
      if (classes_ == 0) return unet_->forward(x, c_noise, {}, context);
      if (labels.defined() && (labels == classes_).any().item<bool>()) {
        throw std::invalid_argument("diffusers_unet: the model has no null class (classifier-free guidance needs one): "
                                    "sample with guidance = 0");
      }
      return unet_->forward(x, c_noise, labels, context);
    };
  }

  // The autoencoder's downsampling (1 in pixel space).
  std::int64_t latent_factor() const {
    return autoencoder_ ? std::int64_t{1} << (autoencoder_->config().block_out_channels.size() - 1) : 1;
  }
  // The frozen parts follow the UNet's device and dtype too (float64 in the privacy checks).
  c10::Device device() {
    const at::Tensor w = unet_->parameters().front();  // (a copy: parameters() is a temporary)
    if (autoencoder_) {
      const at::Tensor a = autoencoder_->parameters().front();  // (a copy: parameters() is a temporary)
      if (a.device() != w.device() || a.scalar_type() != w.scalar_type()) autoencoder_->to(w.device(), w.scalar_type());
    }
    return w.device();
  }
  at::Tensor text_context(const std::vector<std::string>& captions, std::int64_t n) {
    const at::Tensor w = unet_->parameters().front();  // (a copy: parameters() is a temporary)
    return text_->hidden_states(captions, n, w.device(), w.scalar_type());
  }

  std::shared_ptr<dm::DiffusersUNet2D> unet_;
  dm::Preconditioning preconditioning_;
  std::shared_ptr<dm::DiffusersAutoencoderKL> autoencoder_;
  std::int64_t image_size_, classes_;
  double caption_dropout_;
  std::optional<ClipTextSide> text_;
};

namespace {
void register_components(Registrar* registrar) {
  Schema schema;
  schema.add(Key::string("config").doc("the diffusers model's folder (or its config.json): the UNet2DModel or UNet2DConditionModel architecture"))
      .add(Key::string("preconditioning").one_of({"discrete", "edm", "vp", "ve", "v"}).defaults("discrete")
               .doc("diffusion parameterisation; diffusers' DDPM epsilon-prediction on its discrete timesteps is "
                    "discrete (with the scheduler's beta keys)"))
      .add(Key::string("beta_schedule").one_of({"linear", "scaled_linear"}).defaults("linear")
               .doc("discrete: the scheduler_config.json's beta_schedule"))
      .add(Key::number("beta_start").greater_than(0).less_than(1).defaults(1e-4).doc("discrete: its beta_start"))
      .add(Key::number("beta_end").greater_than(0).less_than(1).defaults(0.02).doc("discrete: its beta_end"))
      .add(Key::integer("num_train_timesteps").at_least(2).defaults(1000).doc("discrete: its num_train_timesteps"))
      .add(Key::string("autoencoder").defaults("")
               .doc("a diffusers AutoencoderKL folder: the UNet works in its latent space (frozen, scaled by its "
                    "scaling_factor); empty: pixel space"))
      .add(Key::integer("image_size").at_least(4).defaults(28).doc("image height and width (pixels, also with an autoencoder)"))
      .add(Key::integer("num_classes").at_least(0).defaults(0)
               .doc("classes for conditioning: must equal the config.json's num_class_embeds (0: unconditional)"))
      .add(Key::string("text_encoder").defaults("")
               .doc("a UNet2DConditionModel (Stable Diffusion): the CLIPTextModel folder its captions are read by (the "
                    "pipeline's text_encoder/; loaded with its weights and frozen, not part of the model's weights)"))
      .add(Key::string("tokenizer").defaults("")
               .doc("a UNet2DConditionModel: CLIP's merges (the pipeline's tokenizer/ folder, its merges.txt and pad "
                    "token; or a merges file), as many tokens as the text encoder's vocabulary"))
      .add(Key::number("caption_dropout").at_least(0).at_most(1).defaults(0.1)
               .doc("a UNet2DConditionModel: the probability that an example trains on the empty caption "
                    "(classifier-free guidance's unconditional branch), drawn per example"));
  registrar->add<DiffusersUnet>("diffusers_unet",
                                "diffusers' UNet2DModel or UNet2DConditionModel (Stable Diffusion's, on a CLIP text "
                                "encoder): same parameter names and outputs, its architecture from config.json",
                                std::move(schema));
}
}  // namespace

}  // namespace privdiff::plugins::diffusers_unet

PRIVDIFF_PLUGIN("diffusers_unet", "0.2.0", "diffusers UNet2DModel and UNet2DConditionModel", privdiff::plugins::diffusers_unet::register_components)
