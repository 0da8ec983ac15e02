#include <privdiff/diffusion/compvis_ldm.hpp>

#include "compvis_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

namespace privdiff::sdk::diffusion {

namespace cv = compvis;
using engine::Conv2d;
using engine::GroupNorm;
using engine::Linear;

// A TimestepEmbedSequential: its layers under their indices, each run with the embedding and context.
struct CompVisUNet::Block : torch::nn::Module {
  using Layer = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;
  std::vector<Layer> layers;

  void add_resblock(std::shared_ptr<cv::ResBlock> block) {
    register_module(next(), block);
    layers.push_back([block](const at::Tensor& h, const at::Tensor& emb, const at::Tensor&) { return block->forward(h, emb); });
  }
  void add_attention(const CompVisUNetConfig& c, std::int64_t channels) {
    const std::int64_t heads = c.heads_at(channels);
    if (c.use_spatial_transformer) {
      auto t = register_module(next(), std::make_shared<cv::SpatialTransformer>(channels, heads, channels / heads,
                                                                           c.transformer_depth, c.context_dim));
      layers.push_back([t](const at::Tensor& h, const at::Tensor&, const at::Tensor& context) { return t->forward(h, context); });
    } else {
      auto a = register_module(next(), std::make_shared<cv::LegacyAttention>(channels, heads));
      layers.push_back([a](const at::Tensor& h, const at::Tensor&, const at::Tensor&) { return a->forward(h); });
    }
  }
  // Downsample (a stride-2 "op" convolution) or Upsample (nearest, then "conv").
  void add_resampler(std::int64_t channels, bool down) {
    auto wrapper = register_module(next(), std::make_shared<torch::nn::Module>());
    auto c = wrapper->register_module(down ? "op" : "conv", padded_conv(channels, channels, 3, down ? 2 : 1));
    layers.push_back([c, down](const at::Tensor& h, const at::Tensor&, const at::Tensor&) {
      return c->forward(down ? h : cv::nearest_up(h));
    });
  }
  std::shared_ptr<Conv2d> add_conv(std::shared_ptr<Conv2d> c) {
    register_module(next(), c);
    layers.push_back([c](const at::Tensor& h, const at::Tensor&, const at::Tensor&) { return c->forward(h); });
    return c;
  }

 private:
  std::string next() const { return std::to_string(layers.size()); }
};

// UNetModel.__init__'s sequence: the input blocks (residual blocks with attention at the chosen
// downsampling factors, a resampler between levels), the middle, then the output blocks mirroring
// them with skips; the numbering is the checkpoint's.
CompVisUNet::CompVisUNet(CompVisUNetConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  if (c.channel_mult.empty() || c.num_res_blocks < 1) throw std::invalid_argument("UNetModel: empty channel_mult or no blocks");
  if (c.num_heads <= 0 && c.num_head_channels <= 0) throw std::invalid_argument("UNetModel: num_heads or num_head_channels must be set");
  const std::int64_t emb = 4 * c.model_channels;
  auto time_embed = register_module("time_embed", std::make_shared<torch::nn::Module>());
  time_0_ = time_embed->register_module("0", std::make_shared<Linear>(c.model_channels, emb));
  time_2_ = time_embed->register_module("2", std::make_shared<Linear>(emb, emb));
  if (c.num_classes > 0) label_emb_ = register_module("label_emb", std::make_shared<engine::Embedding>(c.num_classes, emb));
  input_blocks_ = register_module("input_blocks", torch::nn::ModuleList());
  roles_ = {{"time_embed.", "embedding", -1}, {"label_emb.", "conditioning", -1}, {"input_blocks.0.", "io", -1},
            {"out.", "io", -1}};
  std::string prefix;  // of the block being built
  auto new_block = [&](torch::nn::ModuleList& list, std::vector<std::shared_ptr<Block>>& blocks, const char* name) {
    prefix = std::string(name) + "." + std::to_string(list->size()) + ".";
    blocks.push_back(std::make_shared<Block>());
    list->push_back(blocks.back());
    return blocks.back();
  };
  int numbered = 0;
  auto note = [&](const Block& block, const char* role) {
    roles_.push_back({prefix + std::to_string(block.layers.size() - 1) + ".", role, numbered++});
  };
  auto attention_at = [&](std::int64_t ds) {
    return std::find(c.attention_resolutions.begin(), c.attention_resolutions.end(), ds) != c.attention_resolutions.end();
  };
  auto resblock = [&](std::int64_t in, std::int64_t out, int resample) {
    return std::make_shared<cv::ResBlock>(in, out, emb, c.use_scale_shift_norm, resample, c.dropout);
  };
  conv_in_ = new_block(input_blocks_, inputs_, "input_blocks")->add_conv(padded_conv(c.in_channels, c.model_channels, 3));
  std::vector<std::int64_t> skips{c.model_channels};
  std::int64_t ch = c.model_channels, ds = 1;
  const auto levels = c.channel_mult.size();
  for (std::size_t level = 0; level < levels; ++level) {
    for (std::int64_t j = 0; j < c.num_res_blocks; ++j) {
      auto block = new_block(input_blocks_, inputs_, "input_blocks");
      block->add_resblock(resblock(ch, c.channel_mult[level] * c.model_channels, 0));
      note(*block, "resblock");
      ch = c.channel_mult[level] * c.model_channels;
      if (attention_at(ds)) block->add_attention(c, ch), note(*block, "attention");
      skips.push_back(ch);
    }
    if (level + 1 < levels) {
      auto block = new_block(input_blocks_, inputs_, "input_blocks");
      if (c.resblock_updown) block->add_resblock(resblock(ch, ch, -1));
      else block->add_resampler(ch, true);
      note(*block, "resblock");
      skips.push_back(ch);
      ds *= 2;
    }
  }
  middle_ = register_module("middle_block", std::make_shared<Block>());
  prefix = "middle_block.";
  middle_->add_resblock(resblock(ch, ch, 0));
  note(*middle_, "resblock");
  middle_->add_attention(c, ch);
  note(*middle_, "attention");
  middle_->add_resblock(resblock(ch, ch, 0));
  note(*middle_, "resblock");
  output_blocks_ = register_module("output_blocks", torch::nn::ModuleList());
  for (std::size_t level = levels; level-- > 0;) {
    for (std::int64_t j = 0; j <= c.num_res_blocks; ++j) {
      auto block = new_block(output_blocks_, outputs_, "output_blocks");
      block->add_resblock(resblock(ch + skips.back(), c.model_channels * c.channel_mult[level], 0));
      note(*block, "resblock");
      skips.pop_back();
      ch = c.model_channels * c.channel_mult[level];
      if (attention_at(ds)) block->add_attention(c, ch), note(*block, "attention");
      if (level > 0 && j == c.num_res_blocks) {
        if (c.resblock_updown) block->add_resblock(resblock(ch, ch, 1));
        else block->add_resampler(ch, false);
        note(*block, "resblock");
        ds /= 2;
      }
    }
  }
  auto out = register_module("out", std::make_shared<torch::nn::Module>());
  out_norm_ = out->register_module("0", std::make_shared<GroupNorm>(32, ch));
  out_conv_ = out->register_module("2", padded_conv(c.model_channels, c.out_channels, 3));
}

CompVisUNet::~CompVisUNet() = default;

at::Tensor CompVisUNet::run(Block& block, at::Tensor h, const at::Tensor& emb, const at::Tensor& context) {
  for (auto& layer : block.layers) h = layer(h, emb, context);
  return h;
}

at::Tensor CompVisUNet::forward(const at::Tensor& x, const at::Tensor& timesteps, const at::Tensor& context,
                                const at::Tensor& labels) {
  // timestep_embedding: cos then sin of t * 10000^(-i / half).
  const std::int64_t half = config_.model_channels / 2;
  const auto options = at::TensorOptions(at::kFloat).device(x.device());
  const at::Tensor frequencies = (at::arange(half, options) * (-std::log(10000.0) / static_cast<double>(half))).exp();
  const at::Tensor angles = timesteps.to(at::kFloat).reshape({-1, 1}) * frequencies.unsqueeze(0);
  at::Tensor emb = time_2_->forward(at::silu(time_0_->forward(at::cat({angles.cos(), angles.sin()}, 1).to(x.scalar_type()))));
  if (label_emb_) {
    if (!labels.defined()) throw std::invalid_argument("UNetModel: this model needs class labels (num_classes)");
    emb = emb + label_emb_->forward(labels);
  }
  if (config_.use_spatial_transformer && !context.defined()) {
    throw std::invalid_argument("UNetModel: its SpatialTransformers need a context");
  }
  std::vector<at::Tensor> skips;
  at::Tensor h = x;
  for (auto& block : inputs_) skips.push_back(h = run(*block, h, emb, context));
  h = run(*middle_, h, emb, context);
  for (auto& block : outputs_) {
    h = run(*block, at::cat({h, skips.back()}, 1), emb, context);
    skips.pop_back();
  }
  return out_conv_->forward(at::silu(out_norm_->forward(h)));
}

}  // namespace privdiff::sdk::diffusion
