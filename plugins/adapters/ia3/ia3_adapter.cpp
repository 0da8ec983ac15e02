// ia3: IA3 adapters (Liu et al. 2022, "Few-shot parameter-efficient fine-tuning is better and cheaper
// than in-context learning"): a learned vector l rescales a Linear layer's outputs, y = l * (W x + b),
// with l starting at one (an adapted model starts equal to its base). One parameter per output
// feature — far fewer than LoRA's — so DP noise (which grows with the trained dimension) stays small.
// Per-example gradient of l: the sum over positions of g * (W x + b); sampling folds l into W and b.
#include <privdiff/components/adapter.hpp>
#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/engine/per_example_rows.hpp>
#include <privdiff/plugin/export.hpp>

#include <ATen/ATen.h>
#include <torch/types.h>

namespace privdiff::plugins::ia3 {

using namespace privdiff::sdk;

class Ia3Layer : public engine::LinearAdapter {
 public:
  explicit Ia3Layer(std::int64_t out) { ia3_scale = register_parameter("ia3_scale", torch::ones({out})); }

  // As an addition to the base output: (l - 1) * (W x + b).
  at::Tensor delta(const at::Tensor&, const at::Tensor& base_output) override {
    at::Tensor y = base_output * (ia3_scale - 1);
    engine::record_if_capturing(this, base_output, y);
    return y;
  }

  std::pair<at::Tensor, at::Tensor> merged(const at::Tensor& weight, const at::Tensor& bias) const override {
    return {weight * ia3_scale.unsqueeze(1), bias.defined() ? bias * ia3_scale : bias};
  }

  std::vector<at::Tensor> trainable_parameters() const override { return engine::trainable_only({ia3_scale}); }

  std::vector<at::Tensor> per_example(const engine::CapturedCall& call, const at::Tensor& g,
                                      std::int64_t group) const override {
    if (!engine::is_trainable(ia3_scale)) return {};
    const std::int64_t b = engine::rows_per_example(call.saved, group), out = ia3_scale.size(0);
    return {(g * call.saved).reshape({b, -1, out}).sum(1)};
  }

  std::vector<at::Tensor> scaled_sum(const engine::CapturedCall& call, const at::Tensor& g, std::int64_t group,
                                     const std::vector<at::Tensor>& scales) const override {
    if (!engine::is_trainable(ia3_scale)) return {};
    return {(engine::scale_rows(g, scales[0], group) * call.saved).reshape({-1, ia3_scale.size(0)}).sum(0)};
  }

  at::Tensor ia3_scale;  // [out]
};

class Ia3 : public Adapter {
 public:
  explicit Ia3(const Config& c) : targets_(c.get_string("targets")), targets_key_(c.path() + ".targets") {}

  int wrap(torch::nn::Module& root) override {
    return engine::attach_linear_adapters(root, targets_, targets_key_, [](std::int64_t, std::int64_t out) {
      return std::make_shared<Ia3Layer>(out);
    });
  }

 private:
  std::string targets_, targets_key_;
};

namespace {
void register_components(Registrar* registrar) {
  registrar->add<Ia3>("ia3", "IA3: a learned vector rescales chosen Linear layers' outputs; starts at one",
                      Schema{}.add(Key::string("targets").defaults("(qkv|to_k|to_v)$")
                                       .doc("regex searched in the Linear layers' names (privdiff params lists them); "
                                            "default: the key and value projections (the fused qkv of self-attention)")));
}
}  // namespace

}  // namespace privdiff::plugins::ia3

PRIVDIFF_PLUGIN("ia3", "0.1.0", "IA3 adapters", privdiff::plugins::ia3::register_components)
