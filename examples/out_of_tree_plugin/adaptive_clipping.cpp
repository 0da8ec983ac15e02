// The adaptive_clipping mechanism plugin: `mechanism = "adaptive_clipping"` in a recipe's [[stage]].
#include "adaptive_clipping.hpp"

#include <privdiff/plugin/export.hpp>

namespace {
void register_components(privdiff::sdk::Registrar* registrar) {
  registrar->add<adaptive_clipping::AdaptiveClipping>(
      "adaptive_clipping", "DP-SGD whose clip norm follows a quantile of the gradient norms, from a noisy count",
      adaptive_clipping::schema());
}
}  // namespace

PRIVDIFF_PLUGIN("adaptive_clipping", "0.1.0", "Adaptive quantile clipping (Andrew et al., NeurIPS 2021)",
                register_components)
