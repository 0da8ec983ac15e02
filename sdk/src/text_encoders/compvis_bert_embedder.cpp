#include <privdiff/text_encoders/compvis_bert_embedder.hpp>

#include "../diffusion/multi_head_attention.hpp"
#include "token_ids.hpp"

#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::text_encoders {
namespace {

using engine::Embedding;
using engine::LayerNorm;
using engine::Linear;

// x-transformers' Attention, self-attention without a mask: softmax(q k^T / sqrt(64)) v per head.
class BertAttention : public torch::nn::Module {
 public:
  BertAttention(std::int64_t width, std::int64_t heads, std::int64_t head_dim) : heads_(heads) {
    const std::int64_t inner = heads * head_dim;
    q_ = register_module("to_q", std::make_shared<Linear>(width, inner, false));
    k_ = register_module("to_k", std::make_shared<Linear>(width, inner, false));
    v_ = register_module("to_v", std::make_shared<Linear>(width, inner, false));
    out_ = register_module("to_out", std::make_shared<Linear>(inner, width));
  }
  at::Tensor forward(const at::Tensor& x) {
    return out_->forward(diffusion::multi_head_attention(q_->forward(x), k_->forward(x), v_->forward(x), heads_));
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<Linear> q_, k_, v_, out_;
};

// x-transformers' FeedForward: net.0.0 (Linear, then GELU), net.2 (Linear).
class FeedForward : public torch::nn::Module {
 public:
  explicit FeedForward(std::int64_t width) {
    auto net = register_module("net", std::make_shared<torch::nn::Module>());
    in_ = net->register_module("0", std::make_shared<torch::nn::Module>())
              ->register_module("0", std::make_shared<Linear>(width, 4 * width));
    out_ = net->register_module("2", std::make_shared<Linear>(4 * width, width));
  }
  at::Tensor forward(const at::Tensor& x) { return out_->forward(at::gelu(in_->forward(x))); }

 private:
  std::shared_ptr<Linear> in_, out_;
};

// One entry of attn_layers.layers: [0] the pre-norm, [1] the block, [2] the residual (no parameters).
template <class Block>
class PreNormResidual : public torch::nn::Module {
 public:
  PreNormResidual(std::int64_t width, std::shared_ptr<Block> block) : block_(std::move(block)) {
    norm_ = register_module("0", std::make_shared<LayerNorm>(width, 1e-5));
    register_module("1", block_);
  }
  at::Tensor forward(const at::Tensor& x) { return x + block_->forward(norm_->forward(x)); }

 private:
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Block> block_;
};

void check_positive(std::int64_t v, const char* what) {
  if (v <= 0) throw std::invalid_argument(std::string("CompVis BERTEmbedder: ") + what + " = " + std::to_string(v) + ": expected a positive size");
}

}  // namespace

CompVisBertEmbedder::CompVisBertEmbedder(CompVisBertConfig config) : config_(config) {
  const auto& c = config_;
  check_positive(c.vocab_size, "vocab_size");
  check_positive(c.width, "n_embed");
  check_positive(c.layers, "n_layer");
  check_positive(c.max_seq_len, "max_seq_len");
  check_positive(c.heads, "heads");
  check_positive(c.head_dim, "dim_head");
  auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>());
  tokens_ = transformer->register_module("token_emb", std::make_shared<Embedding>(c.vocab_size, c.width));
  positions_ = transformer->register_module("pos_emb", std::make_shared<torch::nn::Module>())
                   ->register_module("emb", std::make_shared<Embedding>(c.max_seq_len, c.width));
  auto list = transformer->register_module("attn_layers", std::make_shared<torch::nn::Module>())
                  ->register_module("layers", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.layers; ++i) {
    blocks_.push_back(std::make_shared<PreNormResidual<BertAttention>>(c.width, std::make_shared<BertAttention>(c.width, c.heads, c.head_dim)));
    list->push_back(blocks_.back());
    blocks_.push_back(std::make_shared<PreNormResidual<FeedForward>>(c.width, std::make_shared<FeedForward>(c.width)));
    list->push_back(blocks_.back());
  }
  norm_ = transformer->register_module("norm", std::make_shared<LayerNorm>(c.width, 1e-5));
  // In every checkpoint, unused by the embedder: buffers, so that they load and export by name and no
  // parameter selection (train = "all" included) trains them or spends noise on them.
  auto logits = transformer->register_module("to_logits", std::make_shared<torch::nn::Module>());
  logits->register_buffer("weight", at::zeros({c.vocab_size, c.width}));
  logits->register_buffer("bias", at::zeros({c.vocab_size}));
}

at::Tensor CompVisBertEmbedder::forward(const at::Tensor& ids) {
  check_token_ids(ids, config_.max_seq_len, config_.vocab_size, "CompVis BERTEmbedder");
  const std::int64_t n = ids.size(0), t = ids.size(1);
  at::Tensor x = tokens_->forward(ids) + positions_->forward(at::arange(t, ids.options()).expand({n, t}));
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    x = i % 2 == 0 ? static_cast<PreNormResidual<BertAttention>&>(*blocks_[i]).forward(x)
                   : static_cast<PreNormResidual<FeedForward>&>(*blocks_[i]).forward(x);
  }
  return norm_->forward(x);
}

}  // namespace privdiff::sdk::text_encoders
