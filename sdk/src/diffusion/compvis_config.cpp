// The "ldm.config" JSON: LatentDiffusion's model.params from a CompVis YAML config, as
// scripts/convert_to_safetensors.py --ldm-config keeps it. Every option the ports do not reproduce
// is refused by its YAML path.
#include <privdiff/diffusion/compvis_ldm.hpp>

#include <privdiff/io/json_error.hpp>

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace privdiff::sdk::diffusion {

namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(const std::string& what) : what_(what) {}
  [[noreturn]] void refuse(const std::string& path, const std::string& problem) const {
    throw std::invalid_argument(what_ + ": " + path + " " + problem);
  }
  const json& section(const json& parent, const std::string& key, const std::string& path) const {
    if (!parent.contains(key) || !parent[key].is_object()) refuse(path + key, "is missing");
    return parent[key];
  }
  // `key` must be absent or `expected`.
  void require(const json& params, const std::string& key, const json& expected, const std::string& path) const {
    if (params.contains(key) && !params[key].is_null() && params[key] != expected) {
      refuse(path + key, "= " + params[key].dump() + " is not supported (privdiff's port: " + expected.dump() + ")");
    }
  }
  void target(const json& config, const std::string& expected, const std::string& path) const {
    const std::string got = config.value("target", "");
    if (got != expected) refuse(path + "target", "= \"" + got + "\" is not supported (privdiff's port: " + expected + ")");
  }

 private:
  std::string what_;
};

CompVisUNetConfig unet_config(const json& p, const Reader& r) {
  const std::string path = "unet_config.params.";
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"dims", 2}, {"use_new_attention_order", false}, {"n_embed", nullptr}, {"legacy", true},
           {"conv_resample", true}}) {
    r.require(p, key, value, path);
  }
  if (p.contains("num_heads_upsample") && p["num_heads_upsample"] != -1 && p["num_heads_upsample"] != p.value("num_heads", -1)) {
    r.refuse(path + "num_heads_upsample", "differs from num_heads, which privdiff's port does not support");
  }
  CompVisUNetConfig c;
  c.image_size = p.value("image_size", c.image_size);
  c.in_channels = p.at("in_channels");
  c.out_channels = p.at("out_channels");
  c.model_channels = p.at("model_channels");
  c.num_res_blocks = p.at("num_res_blocks");
  c.attention_resolutions = p.at("attention_resolutions").get<std::vector<std::int64_t>>();
  if (p.contains("channel_mult")) c.channel_mult = p["channel_mult"].get<std::vector<std::int64_t>>();
  c.num_heads = p.value("num_heads", -1);
  c.num_head_channels = p.value("num_head_channels", -1);
  c.use_scale_shift_norm = p.value("use_scale_shift_norm", false);
  c.resblock_updown = p.value("resblock_updown", false);
  c.use_spatial_transformer = p.value("use_spatial_transformer", false);
  c.transformer_depth = p.value("transformer_depth", 1);
  if (p.contains("context_dim") && !p["context_dim"].is_null()) c.context_dim = p["context_dim"];
  if (p.contains("num_classes") && !p["num_classes"].is_null()) c.num_classes = p["num_classes"];
  c.dropout = p.value("dropout", 0.0);
  if (c.num_heads <= 0 && c.num_head_channels <= 0) r.refuse(path + "num_heads", "and num_head_channels are both unset");
  return c;
}

CompVisAutoencoderConfig autoencoder_config(const json& p, const Reader& r) {
  const std::string path = "first_stage_config.params.ddconfig.";
  const json& d = r.section(p, "ddconfig", "first_stage_config.params.");
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"double_z", true}, {"use_linear_attn", false}, {"attn_type", "vanilla"}, {"resamp_with_conv", true},
           {"tanh_out", false}, {"give_pre_end", false}}) {
    r.require(d, key, value, path);
  }
  CompVisAutoencoderConfig c;
  c.embed_dim = p.at("embed_dim");
  c.z_channels = d.at("z_channels");
  c.resolution = d.at("resolution");
  c.in_channels = d.at("in_channels");
  c.out_ch = d.at("out_ch");
  c.ch = d.at("ch");
  c.ch_mult = d.at("ch_mult").get<std::vector<std::int64_t>>();
  c.num_res_blocks = d.at("num_res_blocks");
  c.attn_resolutions = d.value("attn_resolutions", std::vector<std::int64_t>{});
  c.dropout = d.value("dropout", 0.0);
  return c;
}

// BERTEmbedder(n_embed, n_layer, vocab_size=30522, max_seq_len=77, use_tokenizer=True, embedding_dropout=0):
// its tokenizer is the user's vocab.txt (the model's `tokenizer` key), whatever use_tokenizer says.
text_encoders::CompVisBertConfig bert_config(const json& p, std::int64_t context_dim, const Reader& r) {
  const std::string path = "cond_stage_config.params.";
  r.require(p, "embedding_dropout", 0.0, path);
  text_encoders::CompVisBertConfig c;
  if (!p.contains("n_embed") || !p.contains("n_layer")) r.refuse(path + "n_embed", "and n_layer are required");
  c.width = p.at("n_embed");
  c.layers = p.at("n_layer");
  c.vocab_size = p.value("vocab_size", c.vocab_size);
  c.max_seq_len = p.value("max_seq_len", c.max_seq_len);
  if (c.width != context_dim) r.refuse(path + "n_embed", "differs from unet_config.params.context_dim");
  return c;
}

}  // namespace

CompVisLdmConfig compvis_ldm_config(const std::string& json_text, const std::string& what) {
  const Reader r(what);
  json p;
  try {
    p = json::parse(json_text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(what + ": not valid JSON (" + json_error_text(e) + ")");
  }
  CompVisLdmConfig c;
  try {
    r.require(p, "parameterization", "eps", "");
    r.require(p, "scale_by_std", false, "");
    const json& unet = r.section(p, "unet_config", "");
    r.target(unet, "ldm.modules.diffusionmodules.openaimodel.UNetModel", "unet_config.");
    c.unet = unet_config(r.section(unet, "params", "unet_config."), r);
    const json& first = r.section(p, "first_stage_config", "");
    r.target(first, "ldm.models.autoencoder.AutoencoderKL", "first_stage_config.");
    c.autoencoder = autoencoder_config(r.section(first, "params", "first_stage_config."), r);
    const json cond = p.value("cond_stage_config", json());
    const bool unconditional = cond.is_null() || cond == "__is_unconditional__" || (cond.is_object() && cond.value("target", "") == "__is_unconditional__");
    if (!unconditional) {
      r.require(p, "conditioning_key", "crossattn", "");
      if (cond.is_object() && cond.value("target", "") == "ldm.modules.encoders.modules.BERTEmbedder") {
        c.text = bert_config(r.section(cond, "params", "cond_stage_config."), c.unet.context_dim, r);
      } else {
        r.target(cond, "ldm.modules.encoders.modules.ClassEmbedder", "cond_stage_config.");
        const json& cp = r.section(cond, "params", "cond_stage_config.");
        c.classes = cp.value("n_classes", 1000);
        if (cp.value("embed_dim", 0) != c.unet.context_dim) {
          r.refuse("cond_stage_config.params.embed_dim", "differs from unet_config.params.context_dim");
        }
      }
    }
    c.linear_start = p.value("linear_start", c.linear_start);
    c.linear_end = p.value("linear_end", c.linear_end);
    c.timesteps = p.value("timesteps", c.timesteps);
    c.scale_factor = p.value("scale_factor", c.scale_factor);
  } catch (const json::exception& e) {
    throw std::invalid_argument(what + ": " + json_error_text(e));
  }
  return c;
}

}  // namespace privdiff::sdk::diffusion
