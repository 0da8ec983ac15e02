#include "weights/weights_import.hpp"

#include "util/content_hash.hpp"
#include "weights/safetensors_weights.hpp"

#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/diffusion/compvis_ldm.hpp>
#include <privdiff/diffusion/diffusers_autoencoder.hpp>
#include <privdiff/diffusion/diffusers_unet.hpp>
#include <privdiff/text_encoders/clip_text_model.hpp>
#include <privdiff/diffusion/ncsnpp.hpp>
#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/json_error.hpp>
#include <privdiff/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <iomanip>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

std::string list_text(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

std::string run_table(const fs::path& init_from) {
  return "[run]\ninit_from = \"" + init_from.string() + "\"\ninit_from_disjoint = true   # your statement: its training "
         "data share no one with your private data (docs/weights.md)\n";
}

// DPDM's network: the architecture read off the weights, the recipe keys of dpdm_ncsnpp.
// A UNet halves its images once per level but the last: a size it cannot halve that often would
// fail only when a recipe first runs the model (issue 52: 13 passed for a two-level UNet).
std::string times(std::int64_t n) { return n == 1 ? "once" : n == 2 ? "twice" : std::to_string(n) + " times"; }

void check_image_size(std::int64_t size, std::int64_t halvings, const std::string& why) {
  const std::int64_t divisor = std::int64_t{1} << halvings;
  if (size % divisor != 0) {
    throw std::runtime_error("image size " + std::to_string(size) + ": " + why + ", so the image size must be a multiple "
                             "of " + std::to_string(divisor) + " (give --image-size)");
  }
}

WeightsImport import_dpdm(const fs::path& file, const sdk::SafetensorsFile& weights, std::optional<std::int64_t> image_size,
                          std::unique_ptr<torch::nn::Module>& port) {
  if (!image_size) {
    throw std::runtime_error(file.string() + " holds DPDM's network, whose weights do not record the image size: give "
                             "--image-size (DPDM: 28 for MNIST and Fashion-MNIST, 32 for CIFAR-10, CelebA 32 and "
                             "ImageNet 32, 64 for CelebA 64)");
  }
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& e : weights.entries()) shapes[e.name] = e.shape;
  sdk::diffusion::NcsnppConfig c;
  try {
    c = sdk::diffusion::ncsnpp_config_from_shapes(shapes, *image_size);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  const auto halvings = static_cast<std::int64_t>(c.ch_mult.size()) - 1;
  check_image_size(c.image_size, halvings, "the network has " + std::to_string(c.ch_mult.size()) + " levels and halves its "
                   "images " + times(halvings));
  port = std::make_unique<sdk::diffusion::Ncsnpp>(c);
  WeightsImport out;
  out.architecture = "DPDM's NCSN++ network (nf " + std::to_string(c.nf) + ", ch_mult " + list_text(c.ch_mult) + ", " +
                     std::to_string(c.num_res_blocks) + " blocks per level, attention at " + list_text(c.attn_resolutions) +
                     ", " + (c.label_dim > 0 ? std::to_string(c.label_dim) + " classes" : std::string("unconditional")) +
                     "), which privdiff's dpdm_ncsnpp model runs";
  out.recipe = "[model]\ntype = \"dpdm_ncsnpp\"\nimage_size = " + std::to_string(c.image_size) + "\nimage_channels = " +
               std::to_string(c.in_channels) + "\nchannels = " + std::to_string(c.nf) + "\nchannel_mult = " +
               list_text(c.ch_mult) + "\nnum_res_blocks = " + std::to_string(c.num_res_blocks) +
               "\nattention_resolutions = " + list_text(c.attn_resolutions) + "\nnum_classes = " +
               std::to_string(c.label_dim) + "\npreconditioning = \"edm\"   # DPDM's checkpoints: EDM, sigma_data = sqrt(1/3)\n"
               "[sampler]\ntype = \"ddim\"   # DPDM's sample configs: deterministic, 50 steps, sigma 80 to 0.002, rho 7\nsteps = 50\n";
  return out;
}

// The sampler table of a discrete objective: its noise levels' range.
std::string discrete_sampler(const sdk::diffusion::Preconditioning& objective, const std::string& guidance_note,
                             double guidance = 0) {
  std::ostringstream out;
  out << std::setprecision(6) << "[sampler]\ntype = \"ddim\"   # within the model's discrete noise levels\nsteps = 50\n"
      << "sigma_min = " << objective.discrete_sigmas().front() << "\nsigma_max = " << objective.discrete_sigmas().back()
      << "\nguidance = " << guidance << "   # " << guidance_note << "\n";
  return out.str();
}

// A UNet2DConditionModel's text side, from its pipeline (the folder above unet/): the CLIPTextModel of
// text_encoder/ loads and is as wide as the UNet's cross-attention, and tokenizer/ has CLIP's merges.
// The [model] keys that name them.
std::string text_side_keys(const fs::path& unet_folder, const sdk::diffusion::DiffusersUNet2DConfig& c) {
  const fs::path root = fs::absolute(unet_folder).parent_path();
  const fs::path encoder_dir = root / "text_encoder", tokenizer_dir = root / "tokenizer";
  if (!fs::is_regular_file(encoder_dir / "config.json") || !fs::is_regular_file(tokenizer_dir / "merges.txt")) {
    throw std::runtime_error(unet_folder.string() + ": a UNet2DConditionModel reads a CLIP text encoder: import its "
                             "pipeline folder (model_index.json, with text_encoder/ and tokenizer/merges.txt beside unet/)");
  }
  try {
    sdk::text_encoders::ClipTextModel encoder(sdk::text_encoders::clip_text_config(
        sdk::read_file(encoder_dir / "config.json"), (encoder_dir / "config.json").string()));
    sdk::load_pretrained_weights(encoder_dir / "model.safetensors", encoder);
    if (encoder.config().hidden_size != c.cross_attention_dim) {
      throw std::runtime_error(encoder_dir.string() + ": its hidden_size " + std::to_string(encoder.config().hidden_size) +
                               " is not the UNet's cross_attention_dim " + std::to_string(c.cross_attention_dim));
    }
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  return "text_encoder = \"" + encoder_dir.string() + "\"   # frozen\ntokenizer = \"" + tokenizer_dir.string() +
         "\"\ncaption_dropout = 0.1   # the empty caption, classifier-free guidance's unconditional branch\n";
}

// A diffusers scheduler_config.json beside the UNet (its folder's scheduler/, or the pipeline's):
// the [model] keys of the discrete objective. DDPMScheduler's defaults without one.
std::string scheduler_keys(const fs::path& unet_folder, sdk::diffusion::Preconditioning& objective) {
  nlohmann::json s = nlohmann::json::object();
  for (const fs::path& candidate : {unet_folder / "scheduler" / "scheduler_config.json",
                                    unet_folder.parent_path() / "scheduler" / "scheduler_config.json"}) {
    if (!fs::is_regular_file(candidate)) continue;
    try {
      s = nlohmann::json::parse(sdk::read_file(candidate));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(candidate.string() + " is not valid JSON (" + privdiff::sdk::json_error_text(e) + ")");
    }
    if (s.value("prediction_type", "epsilon") != "epsilon") {
      throw std::runtime_error(candidate.string() + ": prediction_type \"" + s.value("prediction_type", "") +
                               "\" is not supported (privdiff's discrete objective is epsilon-prediction)");
    }
    break;
  }
  const std::string schedule = s.value("beta_schedule", "linear");
  const double start = s.value("beta_start", 1e-4), end = s.value("beta_end", 0.02);
  const std::int64_t steps = s.value("num_train_timesteps", 1000);
  try {
    objective = sdk::diffusion::Preconditioning::discrete(sdk::diffusion::ddpm_alphas_cumprod(schedule, start, end, steps));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(unet_folder.string() + "'s scheduler: " + e.what());
  }
  std::ostringstream out;
  out << std::setprecision(10) << "preconditioning = \"discrete\"   # diffusers' DDPM epsilon-prediction, its scheduler's "
      << "betas\nbeta_schedule = \"" << schedule << "\"\nbeta_start = " << start << "\nbeta_end = " << end
      << "\nnum_train_timesteps = " << steps << "\n";
  return out.str();
}

// A diffusers UNet2DModel or UNet2DConditionModel folder (its config.json gives the architecture), with the AutoencoderKL
// folder of its pipeline when it works in a latent space.
WeightsImport import_diffusers(const fs::path& folder, const fs::path& vae, std::optional<std::int64_t> image_size,
                               std::unique_ptr<torch::nn::Module>& port) {
  const fs::path config_file = folder / "config.json";
  const std::string text = sdk::read_file(config_file);
  const std::string name = diffusers_class_name(config_file);
  if (name == "AutoencoderKL") {  // as weights inspect says: a latent model's part, not a model of its own
    throw std::runtime_error(config_file.string() + ": a diffusers AutoencoderKL, which privdiff runs only as a latent "
                             "UNet's autoencoder: import the pipeline folder (its unet/ and vae/), or name this folder "
                             "as [model] autoencoder = \"" + folder.string() + "\" of a diffusers_unet recipe");
  }
  if (name != "UNet2DModel" && name != "UNet2DConditionModel") {
    throw std::runtime_error(config_file.string() + ": a diffusers " + name + ", which no privdiff model plugin runs yet "
                             "(diffusers_unet runs UNet2DModel and UNet2DConditionModel)");
  }
  sdk::diffusion::DiffusersUNet2DConfig c;
  std::int64_t latent_halvings = 0;  // the autoencoder's: the latent space is 2^this times smaller
  try {
    c = sdk::diffusion::diffusers_unet2d_config(text, config_file.string());
    if (!vae.empty()) {  // the latent space's autoencoder must load too
      sdk::diffusion::DiffusersAutoencoderKL ae(
          sdk::diffusion::diffusers_autoencoder_kl_config(sdk::read_file(vae / "config.json"), (vae / "config.json").string()));
      sdk::load_pretrained_weights(vae / "diffusion_pytorch_model.safetensors", ae);
      latent_halvings = static_cast<std::int64_t>(ae.config().block_out_channels.size()) - 1;
    }
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  port = std::make_unique<sdk::diffusion::DiffusersUNet2D>(c);
  sdk::diffusion::Preconditioning objective(sdk::diffusion::Parameterization::vp);
  const std::string scheduler = scheduler_keys(folder, objective);
  const std::int64_t factor = std::int64_t{1} << latent_halvings;
  const std::int64_t size = image_size.value_or(c.sample_size > 0 ? c.sample_size * factor : 28);
  const auto levels = static_cast<std::int64_t>(c.block_out_channels.size());
  check_image_size(size, levels - 1 + latent_halvings,
                   "the UNet has " + std::to_string(levels) + " levels and halves its " + (vae.empty() ? "images " : "latents ") +
                       times(levels - 1) +
                       (vae.empty() ? std::string() : ", in a latent space " + std::to_string(factor) + " times smaller"));
  WeightsImport out;
  out.architecture = "diffusers " + name + " (config.json)" + (vae.empty() ? "" : " in an AutoencoderKL's latent space") +
                     (c.conditional() ? ", on its pipeline's CLIP text encoder" : "") + ", which privdiff's diffusers_unet model runs";
  out.recipe = "[model]\ntype = \"diffusers_unet\"\nconfig = \"" + fs::absolute(folder).string() + "\"\nnum_classes = " +
               std::to_string(c.num_class_embeds) + "\nimage_size = " + std::to_string(size) + "\n" +
               (vae.empty() ? "" : "autoencoder = \"" + fs::absolute(vae).string() + "\"\n") +
               (c.conditional() ? text_side_keys(folder, c) : "") + scheduler +
               (c.conditional() ? discrete_sampler(objective, "on the captions: Stable Diffusion's guidance scale 7.5 (w = scale - 1)", 6.5)
                                : discrete_sampler(objective, "a diffusers class embedding has no null class"));
  return out;
}

// A CompVis LatentDiffusion checkpoint with its config in the metadata (convert_to_safetensors.py --ldm-config).
WeightsImport import_compvis(const fs::path& file, const sdk::SafetensorsFile& weights, std::optional<std::int64_t> image_size,
                             std::unique_ptr<torch::nn::Module>& port, const std::optional<fs::path>& out) {
  sdk::diffusion::CompVisLdmConfig c;
  const std::string text = weights.metadata().at("ldm.config");
  try {
    c = sdk::diffusion::compvis_ldm_config(text, file.string() + " (ldm.config)");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  port = std::make_unique<sdk::diffusion::CompVisLatentDiffusion>(c);
  const auto objective = sdk::diffusion::Preconditioning::discrete(sdk::diffusion::compvis_alphas_cumprod(c));
  const fs::path config = out ? fs::absolute(*out / "config.json") : fs::absolute(file);
  if (out) {
    fs::create_directories(*out);
    sdk::write_file_atomically(config, text + "\n");
  }
  WeightsImport result;
  result.architecture = "CompVis latent diffusion (UNet " + std::to_string(c.unet.model_channels) + " channels, " +
                        (c.unet.use_spatial_transformer ? "SpatialTransformers" : "attention blocks") + "; KL autoencoder, " +
                        std::to_string(c.autoencoder.embed_dim) + " latent channels; " +
                        (c.classes > 0 ? std::to_string(c.classes) + " classes" : std::string("unconditional")) +
                        "), which privdiff's compvis_ldm model runs";
  result.recipe = "[model]\ntype = \"compvis_ldm\"\nconfig = \"" + config.string() + "\"\nimage_size = " +
                  std::to_string(image_size.value_or(c.autoencoder.resolution)) + "\nnum_classes = " + std::to_string(c.classes) +
                  "\n" + discrete_sampler(objective, "LDM's class embedder has no null class");
  return result;
}

bool is_compvis(const sdk::SafetensorsFile& weights) {
  for (const auto& e : weights.entries()) {
    if (e.name.rfind("model.diffusion_model.", 0) == 0 || e.name.rfind("first_stage_model.", 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::string diffusers_class_name(const fs::path& config_json) {
  try {
    return nlohmann::json::parse(sdk::read_file(config_json)).value("_class_name", "");
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(config_json.string() + " is not valid JSON (" + privdiff::sdk::json_error_text(e) + ")");
  }
}

WeightsImport import_weights(const fs::path& source, std::optional<std::int64_t> image_size,
                             const std::optional<fs::path>& out) {
  std::error_code ec;
  if (!fs::exists(source, ec)) throw std::runtime_error(source.string() + " does not exist");
  const bool folder = fs::is_directory(source, ec);
  // A diffusers pipeline folder (model_index.json): its unet/, with its vae/ when there is one.
  const bool pipeline = folder && fs::is_regular_file(source / "model_index.json", ec);
  const fs::path model_folder = pipeline ? source / "unet" : source;
  const fs::path vae = pipeline && fs::is_regular_file(source / "vae" / "config.json", ec) ? source / "vae" : fs::path();
  const fs::path file = folder ? model_folder / "diffusion_pytorch_model.safetensors" : source;
  if (folder && !fs::is_regular_file(file, ec)) {
    throw std::runtime_error(source.string() + " is not a diffusers model folder (no diffusion_pytorch_model.safetensors)");
  }
  if (!folder && file.extension() != ".safetensors") {
    throw std::runtime_error(file.string() + " is not a .safetensors file (scripts/convert_to_safetensors.py converts "
                             "a pickled checkpoint; add --dpdm for DPDM's)");
  }
  const sdk::SafetensorsFile weights(file);
  std::unique_ptr<torch::nn::Module> port;
  WeightsImport result;
  std::vector<std::string> names;
  for (const auto& e : weights.entries()) names.push_back(e.name);
  if (folder && fs::is_regular_file(model_folder / "config.json", ec)) {
    result = import_diffusers(model_folder, vae, image_size, port);
  } else if (weights.metadata().count("ldm.config")) {
    result = import_compvis(file, weights, image_size, port, out);
  } else if (sdk::diffusion::looks_like_dpdm_ncsnpp(names)) {
    result = import_dpdm(file, weights, image_size, port);
  } else if (is_compvis(weights)) {
    throw std::runtime_error(file.string() + " holds CompVis latent-diffusion weights without their config: convert "
                             "the checkpoint with scripts/convert_to_safetensors.py --ldm-config CONFIG.yaml (the YAML it "
                             "was trained with)");
  } else {
    throw std::runtime_error(file.string() + ": not recognised (privdiff imports diffusers UNet2DModel and UNet2DConditionModel folders and "
                             "DPDM's network; privdiff weights inspect lists what it holds)");
  }
  sdk::load_pretrained_weights(file, *port);  // every tensor by name and shape, or the first mismatch named
  fs::path init_from = folder ? model_folder : file;
  if (out) {
    fs::create_directories(*out);
    result.written = *out / "model.safetensors";
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const auto& p : port->named_parameters(true)) tensors.emplace_back(p.key(), p.value().detach());
    for (const auto& b : port->named_buffers(true)) tensors.emplace_back(b.key(), b.value());
    std::map<std::string, std::string> metadata = weights.metadata();
    metadata["privdiff.imported_from"] = fs::absolute(file).string();
    metadata["privdiff.imported_hash"] = content_hash(sdk::read_file(file));
    sdk::write_safetensors(result.written, tensors, metadata);
    init_from = *out;
  }
  result.recipe = run_table(fs::absolute(init_from)) + result.recipe;
  return result;
}

}  // namespace privdiff::core
