#pragma once
// Automatic clipping (Bu et al., NeurIPS 2023): each example's gradient g is scaled by
// R / (||g|| + gamma) instead of min(1, C / ||g||), so every example contributes with a norm just
// under R and there is no clipping norm to tune. R is the recipe's max_grad_norm, the sensitivity
// the ledger states, as for dpsgd. Only the clip rule is new: batches, noise, the ledger, resume and
// every engine path (ghost norms included) are the engine's (docs/writing-a-plugin.md#mechanisms).
#include <privdiff/config/config.hpp>
#include <privdiff/config/schema.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>

#include <ATen/ATen.h>

namespace automatic_clipping {

using namespace privdiff::sdk;

// DP-SGD's recipe keys plus gamma.
inline Schema schema() {
  Schema s = engine::dp_sgd_schema(/*is_private=*/true, /*with_noise_multiplicity=*/false);
  s.add(Key::number("stability").greater_than(0).defaults(0.01)
            .doc("gamma in R / (||g|| + gamma): the factor of a tiny gradient stays finite"));
  s.document("max_grad_norm", "R: each example's gradient is scaled to a norm just under R (the sensitivity)");
  return s;
}

class AutomaticClipping : public engine::DpSgdMechanism {
 public:
  explicit AutomaticClipping(const Config& config)
      : DpSgdMechanism(engine::dp_sgd_options(config, /*is_private=*/true)), gamma_(config.get_double("stability")) {}

 protected:
  // One example's squared norms per parameter tensor, [1, P] -> its factor, [1].
  at::Tensor clip_factors(const at::Tensor& squared_norms) const override {
    return options().max_grad_norm / (squared_norms.sum(1).sqrt() + gamma_);
  }

 private:
  double gamma_;
};

}  // namespace automatic_clipping
