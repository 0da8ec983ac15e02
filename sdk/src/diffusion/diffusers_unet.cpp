#include <privdiff/diffusion/diffusers_unet.hpp>

#include "diffusers_blocks.hpp"
#include "diffusers_config.hpp"

#include <privdiff/io/json_error.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

namespace {

// One level of either path: its residual blocks (with attention after each, for the Attn* blocks) and
// its resampler; diffusers' names resnets.J, attentions.J, downsamplers.0 / upsamplers.0.
class Level : public torch::nn::Module {
 public:
  std::vector<std::shared_ptr<DiffusersResnet>> resnets;
  std::vector<std::shared_ptr<DiffusersAttention>> attentions;
  std::shared_ptr<DiffusersResampler> resampler;

  Level(const std::vector<std::int64_t>& ins, std::int64_t out, std::int64_t temb, bool attention, int resample,
        const DiffusersUNet2DConfig& c) {
    const std::int64_t heads = c.heads(out);
    auto resnet_list = register_module("resnets", torch::nn::ModuleList());
    torch::nn::ModuleList attention_list;
    if (attention) attention_list = register_module("attentions", torch::nn::ModuleList());
    for (const std::int64_t in : ins) {
      resnets.push_back(std::make_shared<DiffusersResnet>(in, out, temb, c.norm_num_groups, c.norm_eps));
      resnet_list->push_back(resnets.back());
      if (attention) {
        attentions.push_back(std::make_shared<DiffusersAttention>(out, heads, c.norm_num_groups, c.norm_eps));
        attention_list->push_back(attentions.back());
      }
    }
    if (resample != 0) {
      auto list = register_module(resample < 0 ? "downsamplers" : "upsamplers", torch::nn::ModuleList());
      resampler = std::make_shared<DiffusersResampler>(out, resample < 0);
      list->push_back(resampler);
    }
  }
  at::Tensor block(std::size_t j, const at::Tensor& x, const at::Tensor& temb_act) {
    const at::Tensor h = resnets[j]->forward(x, temb_act);
    return attentions.empty() ? h : attentions[j]->forward(h);
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
    down_blocks_->push_back(std::make_shared<Level>(repeated(width, out, c.layers_per_block), out, temb,
                                                    config_.attention[static_cast<std::size_t>(l)], l + 1 < levels ? -1 : 0, c));
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
    mid_attention_ = std::make_shared<DiffusersAttention>(width, c.heads(width), c.norm_num_groups, c.norm_eps);
    list->push_back(mid_attention_);
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
    up_blocks_->push_back(std::make_shared<Level>(ins, out, temb, config_.attention[static_cast<std::size_t>(levels - 1 - i)],
                                                  i + 1 < levels ? 1 : 0, c));
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

at::Tensor DiffusersUNet2D::forward(const at::Tensor& sample, const at::Tensor& timesteps, const at::Tensor& class_labels) {
  const auto dtype = conv_in_->weight.scalar_type();
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
    for (std::size_t j = 0; j < level.resnets.size(); ++j) skips.push_back(h = level.block(j, h, temb_act));
    if (level.resampler) skips.push_back(h = level.resampler->forward(h));
  }
  h = mid_resnets_[0]->forward(h, temb_act);
  if (mid_attention_) h = mid_attention_->forward(h);
  h = mid_resnets_[1]->forward(h, temb_act);
  for (std::size_t i = 0; i < up_blocks_->size(); ++i) {
    auto& level = *up_blocks_->ptr<Level>(i);
    for (std::size_t j = 0; j < level.resnets.size(); ++j) {
      h = level.block(j, at::cat({h, skips.back()}, 1), temb_act);
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
    if (attends && !c.one_head_per_block && width % c.attention_head_dim != 0) {
      throw std::invalid_argument(must(what, key, "is not divisible by attention_head_dim = " +
                                                      std::to_string(c.attention_head_dim) + " (heads of equal size)", width));
    }
  }
}

}  // namespace

DiffusersUNet2DConfig diffusers_unet2d_config(const std::string& json_text, const std::string& what) {
  const nlohmann::json j = diffusers_config_json(json_text, what, "UNet2DModel");
  if (j.contains("mid_block_type") && j["mid_block_type"].is_null()) {  // diffusers: no middle block at all
    throw std::invalid_argument(what + ": mid_block_type = null (no middle block) is not supported by privdiff's "
                                "UNet2DModel (only \"UNetMidBlock2D\")");
  }
  require_diffusers_value(j, "dropout", 0, what, "UNet2DModel");  // training-time dropout is not applied
  for (const auto& [key, expected] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"center_input_sample", false}, {"time_embedding_type", "positional"}, {"time_embedding_dim", nullptr},
           {"mid_block_type", "UNetMidBlock2D"}, {"mid_block_scale_factor", 1}, {"downsample_padding", 1},
           {"downsample_type", "conv"}, {"upsample_type", "conv"}, {"act_fn", "silu"}, {"attn_norm_num_groups", nullptr},
           {"resnet_time_scale_shift", "default"}, {"class_embed_type", nullptr}}) {
    require_diffusers_value(j, key, expected, what, "UNet2DModel");
  }
  DiffusersUNet2DConfig c;
  try {
    c.in_channels = j.value("in_channels", c.in_channels);
    c.out_channels = j.value("out_channels", c.out_channels);
    if (j.contains("block_out_channels")) c.block_out_channels = j["block_out_channels"].get<std::vector<std::int64_t>>();
    c.layers_per_block = j.value("layers_per_block", c.layers_per_block);
    c.norm_num_groups = j.value("norm_num_groups", c.norm_num_groups);
    c.norm_eps = j.value("norm_eps", c.norm_eps);
    if (j.contains("attention_head_dim")) {
      if (j["attention_head_dim"].is_null()) c.one_head_per_block = true;  // diffusers: the block's width
      else c.attention_head_dim = j["attention_head_dim"];
    }
    if (j.contains("num_class_embeds") && !j["num_class_embeds"].is_null()) c.num_class_embeds = j["num_class_embeds"];
    c.flip_sin_to_cos = j.value("flip_sin_to_cos", c.flip_sin_to_cos);
    c.freq_shift = j.value("freq_shift", c.freq_shift);
    c.mid_attention = j.value("add_attention", c.mid_attention);
    if (j.contains("sample_size") && j["sample_size"].is_number_integer()) c.sample_size = j["sample_size"];
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(what + ": " + json_error_text(e));
  }
  const auto down = j.value("down_block_types", std::vector<std::string>{"DownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D"});
  const auto up = j.value("up_block_types", std::vector<std::string>{"AttnUpBlock2D", "AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D"});
  if (down.size() != c.block_out_channels.size() || up.size() != down.size()) {
    throw std::invalid_argument(what + ": down_block_types, up_block_types and block_out_channels differ in length");
  }
  for (std::size_t l = 0; l < down.size(); ++l) {
    if (down[l] != "DownBlock2D" && down[l] != "AttnDownBlock2D") {
      throw std::invalid_argument(what + ": down_block_types[" + std::to_string(l) + "] = " + down[l] +
                                  " is not supported (DownBlock2D, AttnDownBlock2D)");
    }
    const bool attention = down[l] == "AttnDownBlock2D";
    const std::string mirror = attention ? "AttnUpBlock2D" : "UpBlock2D";
    if (up[down.size() - 1 - l] != mirror) {
      throw std::invalid_argument(what + ": up_block_types[" + std::to_string(down.size() - 1 - l) + "] = " +
                                  up[down.size() - 1 - l] + ": privdiff's port needs the up path to mirror the down path (" +
                                  mirror + " there)");
    }
    c.attention.push_back(attention);
  }
  check_sizes(c, what);
  return c;
}

}  // namespace privdiff::sdk::diffusion
