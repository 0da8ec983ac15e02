#include <privdiff/diffusion/diffusers_unet.hpp>

#include "compvis_blocks.hpp"
#include "diffusers_blocks.hpp"
#include "diffusers_config.hpp"

#include <privdiff/io/json_error.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

// One attention block: UNet2DModel's self-attention, or a UNet2DConditionModel's Transformer2DModel
// (whose names and layers are CompVis's SpatialTransformer's) cross-attending to the encoder's states,
// with the settings of down level `level` (the up path mirrors them, the middle takes the last).
struct DiffusersAttend {
  std::shared_ptr<DiffusersAttention> self;
  std::shared_ptr<compvis::SpatialTransformer> cross;

  DiffusersAttend(std::int64_t width, std::size_t level, const DiffusersUNet2DConfig& c) {
    if (!c.conditional()) {
      self = std::make_shared<DiffusersAttention>(width, c.heads(width), c.norm_num_groups, c.norm_eps);
      return;
    }
    const std::int64_t heads = c.level_heads[level];
    cross = std::make_shared<compvis::SpatialTransformer>(width, heads, width / heads, c.transformer_layers[level],
                                                          c.cross_attention_dim, c.norm_num_groups, c.linear_projection);
  }
  std::shared_ptr<torch::nn::Module> module() const {
    return self ? std::static_pointer_cast<torch::nn::Module>(self) : std::static_pointer_cast<torch::nn::Module>(cross);
  }
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& context) const {
    return self ? self->forward(x) : cross->forward(x, context);
  }
};

namespace {

// One level of either path: its residual blocks (with attention after each, for the Attn* and
// CrossAttn* blocks) and its resampler; diffusers' names resnets.J, attentions.J, downsamplers.0 /
// upsamplers.0. `level`: the down level whose attention settings it has.
class Level : public torch::nn::Module {
 public:
  std::vector<std::shared_ptr<DiffusersResnet>> resnets;
  std::vector<DiffusersAttend> attentions;
  std::shared_ptr<DiffusersResampler> resampler;

  Level(const std::vector<std::int64_t>& ins, std::int64_t out, std::int64_t temb, bool attention, int resample,
        std::size_t level, const DiffusersUNet2DConfig& c) {
    auto resnet_list = register_module("resnets", torch::nn::ModuleList());
    torch::nn::ModuleList attention_list;
    if (attention) attention_list = register_module("attentions", torch::nn::ModuleList());
    for (const std::int64_t in : ins) {
      resnets.push_back(std::make_shared<DiffusersResnet>(in, out, temb, c.norm_num_groups, c.norm_eps));
      resnet_list->push_back(resnets.back());
      if (attention) {
        attentions.emplace_back(out, level, c);
        attention_list->push_back(attentions.back().module());
      }
    }
    if (resample != 0) {
      auto list = register_module(resample < 0 ? "downsamplers" : "upsamplers", torch::nn::ModuleList());
      resampler = std::make_shared<DiffusersResampler>(out, resample < 0);
      list->push_back(resampler);
    }
  }
  at::Tensor block(std::size_t j, const at::Tensor& x, const at::Tensor& temb_act, const at::Tensor& context) {
    const at::Tensor h = resnets[j]->forward(x, temb_act);
    return attentions.empty() ? h : attentions[j](h, context);
  }
};

std::vector<std::int64_t> repeated(std::int64_t first, std::int64_t rest, std::int64_t count) {
  std::vector<std::int64_t> out{first};
  for (std::int64_t i = 1; i < count; ++i) out.push_back(rest);
  return out;
}

}  // namespace

DiffusersUNet2D::DiffusersUNet2D(DiffusersUNet2DConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  const auto& widths = c.block_out_channels;
  const auto levels = static_cast<std::int64_t>(widths.size());
  if (levels == 0) throw std::invalid_argument("UNet2DModel: block_out_channels is empty");
  if (c.attention.size() != widths.size()) config_.attention.resize(widths.size(), false);
  const std::int64_t temb = 4 * widths[0];
  conv_in_ = register_module("conv_in", padded_conv(c.in_channels, widths[0], 3));
  auto time_embedding = register_module("time_embedding", std::make_shared<torch::nn::Module>());
  time_linear_1_ = time_embedding->register_module("linear_1", std::make_shared<Linear>(widths[0], temb));
  time_linear_2_ = time_embedding->register_module("linear_2", std::make_shared<Linear>(temb, temb));
  if (c.num_class_embeds > 0) {
    class_embedding_ = register_module("class_embedding", std::make_shared<engine::Embedding>(c.num_class_embeds, temb));
  }
  down_blocks_ = register_module("down_blocks", torch::nn::ModuleList());
  std::int64_t width = widths[0];
  for (std::int64_t l = 0; l < levels; ++l) {
    const std::int64_t out = widths[static_cast<std::size_t>(l)];
    const auto level = static_cast<std::size_t>(l);
    down_blocks_->push_back(std::make_shared<Level>(repeated(width, out, c.layers_per_block), out, temb,
                                                    config_.attention[level], l + 1 < levels ? -1 : 0, level, config_));
    width = out;
  }
  mid_block_ = register_module("mid_block", std::make_shared<torch::nn::Module>());
  auto mid_resnets = mid_block_->register_module("resnets", torch::nn::ModuleList());
  for (int i = 0; i < 2; ++i) {
    mid_resnets_.push_back(std::make_shared<DiffusersResnet>(width, width, temb, c.norm_num_groups, c.norm_eps));
    mid_resnets->push_back(mid_resnets_.back());
  }
  if (c.mid_attention) {
    auto list = mid_block_->register_module("attentions", torch::nn::ModuleList());
    mid_attend_ = std::make_shared<DiffusersAttend>(width, widths.size() - 1, config_);
    list->push_back(mid_attend_->module());
  }
  // Up level i mirrors down level L-1-i with one more block; block j's input is the previous output
  // concatenated with a skip: the down path's outputs, last first.
  up_blocks_ = register_module("up_blocks", torch::nn::ModuleList());
  std::int64_t previous = widths.back();
  for (std::int64_t i = 0; i < levels; ++i) {
    const std::int64_t out = widths[static_cast<std::size_t>(levels - 1 - i)];
    const std::int64_t skip_in = widths[static_cast<std::size_t>(std::max<std::int64_t>(levels - 2 - i, 0))];
    std::vector<std::int64_t> ins;
    for (std::int64_t j = 0; j <= c.layers_per_block; ++j) {
      ins.push_back((j == 0 ? previous : out) + (j == c.layers_per_block ? skip_in : out));
    }
    const auto mirrored = static_cast<std::size_t>(levels - 1 - i);
    up_blocks_->push_back(std::make_shared<Level>(ins, out, temb, config_.attention[mirrored], i + 1 < levels ? 1 : 0,
                                                  mirrored, config_));
    previous = out;
  }
  conv_norm_out_ = register_module("conv_norm_out", std::make_shared<GroupNorm>(c.norm_num_groups, widths[0], c.norm_eps));
  conv_out_ = register_module("conv_out", padded_conv(widths[0], c.out_channels, 3));
}

DiffusersUNet2D::~DiffusersUNet2D() = default;

at::Tensor DiffusersUNet2D::timestep_features(const at::Tensor& timesteps, std::int64_t batch) const {
  const std::int64_t dim = config_.block_out_channels[0], half = dim / 2;
  const auto options = at::TensorOptions(at::kFloat).device(timesteps.device());
  const at::Tensor exponent = at::arange(half, options) * (-std::log(10000.0) / (static_cast<double>(half) - config_.freq_shift));
  const at::Tensor t = timesteps.to(at::kFloat).reshape({-1}).expand({batch});
  const at::Tensor angles = t.unsqueeze(1) * exponent.exp().unsqueeze(0);
  at::Tensor features = config_.flip_sin_to_cos ? at::cat({angles.cos(), angles.sin()}, 1) : at::cat({angles.sin(), angles.cos()}, 1);
  if (dim % 2 == 1) features = at::constant_pad_nd(features, {0, 1});
  return features;
}

at::Tensor DiffusersUNet2D::forward(const at::Tensor& sample, const at::Tensor& timesteps, const at::Tensor& class_labels,
                                    const at::Tensor& context) {
  const auto dtype = conv_in_->weight.scalar_type();
  if (config_.conditional() && !context.defined()) {
    throw std::invalid_argument("UNet2DConditionModel: this model needs encoder_hidden_states (the text encoder's output)");
  }
  at::Tensor emb = time_linear_2_->forward(at::silu(time_linear_1_->forward(timestep_features(timesteps, sample.size(0)).to(dtype))));
  if (class_embedding_) {
    if (!class_labels.defined()) throw std::invalid_argument("UNet2DModel: this model needs class labels (num_class_embeds)");
    emb = emb + class_embedding_->forward(class_labels);
  }
  const at::Tensor temb_act = at::silu(emb);
  at::Tensor h = conv_in_->forward(sample);
  std::vector<at::Tensor> skips{h};
  for (std::size_t l = 0; l < down_blocks_->size(); ++l) {
    auto& level = *down_blocks_->ptr<Level>(l);
    for (std::size_t j = 0; j < level.resnets.size(); ++j) skips.push_back(h = level.block(j, h, temb_act, context));
    if (level.resampler) skips.push_back(h = level.resampler->forward(h));
  }
  h = mid_resnets_[0]->forward(h, temb_act);
  if (mid_attend_) h = (*mid_attend_)(h, context);
  h = mid_resnets_[1]->forward(h, temb_act);
  for (std::size_t i = 0; i < up_blocks_->size(); ++i) {
    auto& level = *up_blocks_->ptr<Level>(i);
    for (std::size_t j = 0; j < level.resnets.size(); ++j) {
      h = level.block(j, at::cat({h, skips.back()}, 1), temb_act, context);
      skips.pop_back();
    }
    if (level.resampler) h = level.resampler->forward(h);
  }
  return conv_out_->forward(at::silu(conv_norm_out_->forward(h)));
}

}  // namespace privdiff::sdk::diffusion

namespace privdiff::sdk::diffusion {

namespace {

std::string must(const std::string& what, const std::string& key, const std::string& rule, std::int64_t value) {
  return what + ": " + key + " = " + std::to_string(value) + ": " + rule;
}

// The sizes the port divides by or builds from: refused with the key, before a layer is made (a zero
// head size would divide by zero).
void check_sizes(const DiffusersUNet2DConfig& c, const std::string& what) {
  if (c.block_out_channels.empty()) throw std::invalid_argument(what + ": block_out_channels is empty (one width per level)");
  if (c.in_channels < 1) throw std::invalid_argument(must(what, "in_channels", "must be >= 1", c.in_channels));
  if (c.out_channels < 1) throw std::invalid_argument(must(what, "out_channels", "must be >= 1", c.out_channels));
  if (c.layers_per_block < 1) throw std::invalid_argument(must(what, "layers_per_block", "must be >= 1", c.layers_per_block));
  if (c.norm_num_groups < 1) throw std::invalid_argument(must(what, "norm_num_groups", "must be >= 1", c.norm_num_groups));
  if (c.attention_head_dim < 1) {
    throw std::invalid_argument(must(what, "attention_head_dim", "must be >= 1 (channels per attention head)", c.attention_head_dim));
  }
  if (c.num_class_embeds < 0) throw std::invalid_argument(must(what, "num_class_embeds", "must be >= 0", c.num_class_embeds));
  for (std::size_t l = 0; l < c.block_out_channels.size(); ++l) {
    const std::int64_t width = c.block_out_channels[l];
    const std::string key = "block_out_channels[" + std::to_string(l) + "]";
    if (width < 1) throw std::invalid_argument(must(what, key, "must be >= 1", width));
    if (width % c.norm_num_groups != 0) {
      throw std::invalid_argument(must(what, key, "is not divisible by norm_num_groups = " + std::to_string(c.norm_num_groups) +
                                                      " (GroupNorm splits each width into that many groups)", width));
    }
    const bool attends = (l < c.attention.size() && c.attention[l]) || (c.mid_attention && l + 1 == c.block_out_channels.size());
    if (attends && !c.conditional() && !c.one_head_per_block && width % c.attention_head_dim != 0) {
      throw std::invalid_argument(must(what, key, "is not divisible by attention_head_dim = " +
                                                      std::to_string(c.attention_head_dim) + " (heads of equal size)", width));
    }
  }
}

}  // namespace

namespace {

// The options both classes have and privdiff's port has one value of; then each class's own.
void refuse_unsupported(const nlohmann::json& j, const std::string& what, const std::string& cls) {
  const bool conditional = cls == "UNet2DConditionModel";
  if (j.contains("mid_block_type") && j["mid_block_type"].is_null()) {  // diffusers: no middle block at all
    throw std::invalid_argument(what + ": mid_block_type = null (no middle block) is not supported by privdiff's " + cls);
  }
  std::vector<std::pair<std::string, nlohmann::json>> only{
      {"dropout", 0}, {"center_input_sample", false}, {"time_embedding_type", "positional"}, {"time_embedding_dim", nullptr},
      {"mid_block_scale_factor", 1}, {"downsample_padding", 1}, {"act_fn", "silu"}, {"resnet_time_scale_shift", "default"},
      {"class_embed_type", nullptr}};
  const std::vector<std::pair<std::string, nlohmann::json>> own =
      conditional ? std::vector<std::pair<std::string, nlohmann::json>>{
                        {"mid_block_type", "UNetMidBlock2DCrossAttn"}, {"only_cross_attention", false},
                        {"dual_cross_attention", false}, {"encoder_hid_dim", nullptr}, {"encoder_hid_dim_type", nullptr},
                        {"addition_embed_type", nullptr}, {"addition_time_embed_dim", nullptr},
                        {"num_attention_heads", nullptr}, {"resnet_skip_time_act", false}, {"resnet_out_scale_factor", 1},
                        {"time_embedding_act_fn", nullptr}, {"timestep_post_act", nullptr}, {"time_cond_proj_dim", nullptr},
                        {"conv_in_kernel", 3}, {"conv_out_kernel", 3}, {"projection_class_embeddings_input_dim", nullptr},
                        {"attention_type", "default"}, {"class_embeddings_concat", false},
                        {"mid_block_only_cross_attention", nullptr}, {"cross_attention_norm", nullptr},
                        {"reverse_transformer_layers_per_block", nullptr}}
                  : std::vector<std::pair<std::string, nlohmann::json>>{
                        {"mid_block_type", "UNetMidBlock2D"}, {"downsample_type", "conv"}, {"upsample_type", "conv"},
                        {"attn_norm_num_groups", nullptr}};
  only.insert(only.end(), own.begin(), own.end());
  for (const auto& [key, expected] : only) require_diffusers_value(j, key, expected, what, cls);
}

// An int for every level, or a list of one per level (diffusers' attention_head_dim and
// transformer_layers_per_block).
std::vector<std::int64_t> per_level(const nlohmann::json& j, const std::string& key, std::int64_t fallback,
                                    std::size_t levels, const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return std::vector<std::int64_t>(levels, fallback);
  if (j[key].is_number_integer()) return std::vector<std::int64_t>(levels, j[key].get<std::int64_t>());
  const auto out = j[key].get<std::vector<std::int64_t>>();
  if (out.size() != levels) {
    throw std::invalid_argument(what + ": " + key + " has " + std::to_string(out.size()) + " values for " +
                                std::to_string(levels) + " levels (one per level, or one number for all)");
  }
  return out;
}

// UNet2DConditionModel's cross-attention: its width, heads and transformer blocks per level (diffusers
// reads attention_head_dim as the number of heads), SD 2.x's linear projections.
void read_cross_attention(const nlohmann::json& j, DiffusersUNet2DConfig& c, const std::string& what) {
  if (j.contains("cross_attention_dim") && !j["cross_attention_dim"].is_number_integer()) {
    throw std::invalid_argument(what + ": cross_attention_dim = " + j["cross_attention_dim"].dump() +
                                ": privdiff's UNet2DConditionModel takes one width for every level");
  }
  c.cross_attention_dim = j.value("cross_attention_dim", std::int64_t{1280});
  c.level_heads = per_level(j, "attention_head_dim", 8, c.block_out_channels.size(), what);
  c.transformer_layers = per_level(j, "transformer_layers_per_block", 1, c.block_out_channels.size(), what);
  c.linear_projection = j.value("use_linear_projection", false);
  auto positive = [&](const std::vector<std::int64_t>& values, const std::string& key) {
    for (const auto v : values) {
      if (v < 1) throw std::invalid_argument(must(what, key, "must be >= 1", v));
    }
  };
  positive({c.cross_attention_dim}, "cross_attention_dim");
  positive(c.level_heads, "attention_head_dim");
  positive(c.transformer_layers, "transformer_layers_per_block");
  for (std::size_t l = 0; l < c.block_out_channels.size(); ++l) {
    const bool attends = c.attention[l] || l + 1 == c.block_out_channels.size();  // the middle block attends
    if (attends && c.block_out_channels[l] % c.level_heads[l] != 0) {
      throw std::invalid_argument(must(what, "block_out_channels[" + std::to_string(l) + "]", "is not divisible by its "
                                       "level's attention_head_dim = " + std::to_string(c.level_heads[l]) +
                                       " (diffusers' number of heads there)", c.block_out_channels[l]));
    }
  }
}

// The sizes both classes read, with the class's defaults.
DiffusersUNet2DConfig read_sizes(const nlohmann::json& j, const std::string& what, bool conditional) {
  DiffusersUNet2DConfig c;
  if (conditional) c.in_channels = c.out_channels = 4, c.block_out_channels = {320, 640, 1280, 1280};
  try {
    c.in_channels = j.value("in_channels", c.in_channels);
    c.out_channels = j.value("out_channels", c.out_channels);
    if (j.contains("block_out_channels")) c.block_out_channels = j["block_out_channels"].get<std::vector<std::int64_t>>();
    c.layers_per_block = j.value("layers_per_block", c.layers_per_block);
    c.norm_num_groups = j.value("norm_num_groups", c.norm_num_groups);
    c.norm_eps = j.value("norm_eps", c.norm_eps);
    if (!conditional && j.contains("attention_head_dim")) {
      if (j["attention_head_dim"].is_null()) c.one_head_per_block = true;  // diffusers: the block's width
      else c.attention_head_dim = j["attention_head_dim"];
    }
    if (j.contains("num_class_embeds") && !j["num_class_embeds"].is_null()) c.num_class_embeds = j["num_class_embeds"];
    c.flip_sin_to_cos = j.value("flip_sin_to_cos", c.flip_sin_to_cos);
    c.freq_shift = j.value("freq_shift", c.freq_shift);
    c.mid_attention = conditional || j.value("add_attention", c.mid_attention);
    if (j.contains("sample_size") && j["sample_size"].is_number_integer()) c.sample_size = j["sample_size"];
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": " + json_error_text(e));
  }
  return c;
}

// The levels' block types: each down level plain or with attention, the up path mirroring it.
void read_block_types(const nlohmann::json& j, DiffusersUNet2DConfig& c, const std::string& what, bool conditional) {
  const std::string attn = conditional ? "CrossAttn" : "Attn";
  const std::vector<std::string> default_down{conditional ? attn + "DownBlock2D" : "DownBlock2D", attn + "DownBlock2D",
                                              attn + "DownBlock2D", conditional ? "DownBlock2D" : attn + "DownBlock2D"};
  std::vector<std::string> default_up;
  for (auto it = default_down.rbegin(); it != default_down.rend(); ++it) {
    default_up.push_back(it->substr(0, it->size() - std::string("DownBlock2D").size()) + "UpBlock2D");
  }
  const auto down = j.value("down_block_types", default_down);
  const auto up = j.value("up_block_types", default_up);
  if (down.size() != c.block_out_channels.size() || up.size() != down.size()) {
    throw std::invalid_argument(what + ": down_block_types, up_block_types and block_out_channels differ in length");
  }
  for (std::size_t l = 0; l < down.size(); ++l) {
    if (down[l] != "DownBlock2D" && down[l] != attn + "DownBlock2D") {
      throw std::invalid_argument(what + ": down_block_types[" + std::to_string(l) + "] = " + down[l] +
                                  " is not supported (DownBlock2D, " + attn + "DownBlock2D)");
    }
    const bool attention = down[l] == attn + "DownBlock2D";
    const std::string mirror = attention ? attn + "UpBlock2D" : "UpBlock2D";
    if (up[down.size() - 1 - l] != mirror) {
      throw std::invalid_argument(what + ": up_block_types[" + std::to_string(down.size() - 1 - l) + "] = " +
                                  up[down.size() - 1 - l] + ": privdiff's port needs the up path to mirror the down path (" +
                                  mirror + " there)");
    }
    c.attention.push_back(attention);
  }
}

}  // namespace

DiffusersUNet2DConfig diffusers_unet2d_config(const std::string& json_text, const std::string& what) {
  const nlohmann::json peek = nlohmann::json::parse(json_text, nullptr, false);
  const bool conditional = peek.is_object() && peek.value("_class_name", "") == "UNet2DConditionModel";
  const std::string cls = conditional ? "UNet2DConditionModel" : "UNet2DModel";
  const nlohmann::json j = diffusers_config_json(json_text, what, cls);
  refuse_unsupported(j, what, cls);
  DiffusersUNet2DConfig c = read_sizes(j, what, conditional);
  try {
    read_block_types(j, c, what, conditional);
    if (conditional) read_cross_attention(j, c, what);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": " + json_error_text(e));
  }
  check_sizes(c, what);
  return c;
}

}  // namespace privdiff::sdk::diffusion
