// lora: low-rank adapters (Hu et al. 2021) on a model's Linear layers, as DP-LoRA and DP-LDM's LoRA
// variant fine-tune: W x + b becomes W x + b + (alpha / r) B A dropout(x), A [r, in] (uniform init),
// B [out, r] (zeros, so an adapted model starts equal to its base). Per-example gradients of A and B
// are closed-form; sampling folds B A into W.
#include <privdiff/components/adapter.hpp>
#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/engine/per_example_rows.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

#include <cmath>

namespace privdiff::plugins::lora {

using namespace privdiff::sdk;

struct LoraOptions {
  std::int64_t rank;
  double scale;    // alpha / r
  double dropout;  // on the adapter's input, training only
};

class LoraLayer : public engine::LinearAdapter {
 public:
  LoraLayer(std::int64_t in, std::int64_t out, const LoraOptions& o) : options_(o) {
    lora_A = register_parameter("lora_A", torch::empty({o.rank, in}));
    torch::NoGradGuard no_grad;
    const double bound = 1 / std::sqrt(static_cast<double>(in));  // PyTorch's Linear initialisation
    lora_A.uniform_(-bound, bound);
    lora_B = register_parameter("lora_B", torch::zeros({out, o.rank}));
  }

  at::Tensor delta(const at::Tensor& x, const at::Tensor&) override {
    const bool drop = options_.dropout > 0 && is_training();
    const at::Tensor xd = drop ? at::dropout(x, options_.dropout, true) : x;
    at::Tensor y = options_.scale * at::linear(at::linear(xd, lora_A), lora_B);
    engine::record_if_capturing(this, xd, y);  // the gradients need the (dropped-out) input
    return y;
  }

  std::pair<at::Tensor, at::Tensor> merged(const at::Tensor& weight, const at::Tensor& bias) const override {
    return {weight + options_.scale * at::mm(lora_B, lora_A), bias};
  }

  std::vector<at::Tensor> trainable_parameters() const override { return engine::trainable_only({lora_A, lora_B}); }

  std::vector<at::Tensor> per_example(const engine::CapturedCall& call, const at::Tensor& g,
                                      std::int64_t group) const override {
    const std::int64_t b = engine::rows_per_example(call.saved, group);
    const at::Tensor xd = call.saved.reshape({b, -1, lora_A.size(1)});
    const at::Tensor gg = g.reshape({b, -1, lora_B.size(0)});
    std::vector<at::Tensor> out;
    if (engine::is_trainable(lora_A)) {  // dL/dA = s (g B)^T xd
      out.push_back(at::bmm(at::matmul(gg, lora_B.detach()).transpose(1, 2), xd) * options_.scale);
    }
    if (engine::is_trainable(lora_B)) {  // dL/dB = s g^T (xd A^T)
      out.push_back(at::bmm(gg.transpose(1, 2), at::matmul(xd, lora_A.detach().t())) * options_.scale);
    }
    return out;
  }

  std::vector<at::Tensor> scaled_sum(const engine::CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override {
    const at::Tensor xd = call.saved.reshape({-1, lora_A.size(1)});
    std::vector<at::Tensor> out;
    std::size_t k = 0;
    auto scaled = [&]() { return engine::scale_rows(g, scales[k++], group).reshape({-1, lora_B.size(0)}); };
    if (engine::is_trainable(lora_A)) out.push_back(at::mm(at::mm(scaled(), lora_B.detach()).t(), xd) * options_.scale);
    if (engine::is_trainable(lora_B)) out.push_back(at::mm(scaled().t(), at::mm(xd, lora_A.detach().t())) * options_.scale);
    return out;
  }

  at::Tensor lora_A, lora_B;  // [r, in], [out, r]

 private:
  LoraOptions options_;
};

LoraOptions lora_options(const Config& c) {
  const auto rank = static_cast<double>(c.get_int("rank"));
  const double alpha = c.get_double("alpha") > 0 ? c.get_double("alpha") : rank;  // 0: alpha = r, scale 1
  return {c.get_int("rank"), alpha / rank, c.get_double("dropout")};
}

class Lora : public Adapter {
 public:
  explicit Lora(const Config& c)
      : options_(lora_options(c)),
        targets_(c.get_string("targets")),
        targets_key_(c.path() + ".targets") {}

  int wrap(torch::nn::Module& root) override {
    return engine::attach_linear_adapters(root, targets_, targets_key_, [this](std::int64_t in, std::int64_t out) {
      return std::make_shared<LoraLayer>(in, out, options_);
    });
  }

 private:
  LoraOptions options_;
  std::string targets_, targets_key_;
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Lora>(
      "lora", "low-rank adapters (r x in, out x r) on chosen Linear layers; B starts at zero",
      Schema{}
          .add(Key::integer("rank").at_least(1).defaults(4).doc("adapter rank r"))
          .add(Key::number("alpha").at_least(0).defaults(0.0).doc("scale alpha / r; 0 = alpha equal to the rank (scale 1)"))
          .add(Key::number("dropout").at_least(0).less_than(1).defaults(0.0).doc("dropout on the adapters' input, training only"))
          .add(Key::string("targets").defaults("attn[0-9]*\\.(qkv|proj|q|k|v|out|to_q|to_k|to_v|to_out)$")
                   .doc("regex searched in the Linear layers' names (privdiff params lists them); default: the attention "
                        "q/k/v/out projections (qkv and proj of self-attention, to_q/k/v/out of the latent model's "
                        "transformers)")));
}
}  // namespace

}  // namespace privdiff::plugins::lora

PRIVDIFF_PLUGIN("lora", "0.1.0", "LoRA adapters", privdiff::plugins::lora::register_components)
