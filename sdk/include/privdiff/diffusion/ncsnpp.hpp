#pragma once
/// @file
/// DPDM's network exactly: NCSN++ / DDPM++ (Song et al. 2021, score_sde's model/ncsnpp.py) in the
/// configuration DPDM trains (github.com/nv-tlabs/DPDM: BigGAN residual blocks that also resample,
/// no FIR filter, sinusoidal noise-level embedding, a class embedding with a null class for
/// classifier-free guidance added to it, skip rescaling by 1/sqrt(2), GroupNorm with min(C/4, 32)
/// groups). Built from privdiff's per-example layers under DPDM's parameter names
/// (all_modules.N.Conv_0.weight, ...), so DPDM's published checkpoints, converted by
/// scripts/convert_to_safetensors.py --dpdm, load by name and give DPDM's outputs
/// (tests/fixtures/weights/dpdm). One exception: score_sde's NIN layers (the attention's 1x1
/// projections) keep their matrix as W [in, out] and b; here they are Linear layers,
/// NIN_k.weight = W^T and NIN_k.bias = b (ncsnpp_port_name says which source a name reads).

#include <privdiff/sdk_api.hpp>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk::engine {
class Conv2d;
class Embedding;
class GroupNorm;
class Linear;
}  // namespace privdiff::sdk::engine

namespace privdiff::sdk::diffusion {

/// NCSNpp's constructor arguments as DPDM's configs set them (defaults: DPDM's MNIST network).
struct NcsnppConfig {
  std::int64_t image_size = 28;
  std::int64_t in_channels = 1, out_channels = 1;
  std::int64_t nf = 32;
  std::vector<std::int64_t> ch_mult{1, 2, 2};
  std::int64_t num_res_blocks = 2;
  std::vector<std::int64_t> attn_resolutions{7};
  std::int64_t label_dim = 10;  ///< 0: unconditional; else labels [0, label_dim) and label_dim the null class
  double dropout = 0;
};

class NcsnppResnetBlock;
class NcsnppAttention;

class PRIVDIFF_SDK_API Ncsnpp : public torch::nn::Module {
 public:
  explicit Ncsnpp(NcsnppConfig config);
  ~Ncsnpp() override;
  /// NCSNpp.forward(x, time_cond, y): x [N, C, H, W], c_noise [N] (DPDM's EDM wrapper gives
  /// ln(sigma) / 4), labels int64 [N] (label_dim: the null class), undefined when unconditional.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& c_noise, const at::Tensor& labels);
  const NcsnppConfig& config() const { return config_; }
  /// The module index (all_modules.N) of each residual or attention block, with its kind.
  struct Block {
    std::int64_t module;
    bool attention;
  };
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  template <class M>
  std::shared_ptr<M> add(std::shared_ptr<M> module);
  NcsnppConfig config_;
  torch::nn::ModuleList all_modules_;
  std::vector<Block> blocks_;
  std::shared_ptr<engine::Embedding> label_embedding_;
  std::shared_ptr<engine::Linear> dense_0_, dense_1_;
  std::shared_ptr<engine::Conv2d> conv_in_, conv_out_;
  std::shared_ptr<engine::GroupNorm> norm_out_;
  struct Level {
    std::vector<std::shared_ptr<NcsnppResnetBlock>> blocks;
    std::vector<std::shared_ptr<NcsnppAttention>> attention;  ///< down: one per block (or none); up: at most one
    std::shared_ptr<NcsnppResnetBlock> resample;             ///< the down (or up) residual block, or null
  };
  std::vector<Level> down_, up_;
  std::shared_ptr<NcsnppResnetBlock> mid_0_, mid_1_;
  std::shared_ptr<NcsnppAttention> mid_attention_;
};

/// Where a parameter of the port reads its value in DPDM's layout: the same name, except
/// "...NIN_k.weight" (from "...NIN_k.W", transposed) and "...NIN_k.bias" (from "...NIN_k.b").
struct PortSource {
  std::string name;
  bool transposed = false;
};
PRIVDIFF_SDK_API PortSource ncsnpp_port_source(const std::string& port_name);

/// Whether tensor names are DPDM's network's (all_modules.N... with score_sde's NIN layers).
PRIVDIFF_SDK_API bool looks_like_dpdm_ncsnpp(const std::vector<std::string>& names);

/// The NcsnppConfig that has exactly these parameter shapes (DPDM's layout or the port's), reading
/// the architecture off the module sequence; image_size is not in the weights and is given.
/// Throws std::invalid_argument naming the first module that does not fit NCSN++'s sequence.
PRIVDIFF_SDK_API NcsnppConfig ncsnpp_config_from_shapes(const std::map<std::string, std::vector<std::int64_t>>& shapes,
                                                         std::int64_t image_size);

}  // namespace privdiff::sdk::diffusion
