// The automatic_clipping mechanism plugin: `mechanism = "automatic_clipping"` in a recipe's [[stage]].
#include "automatic_clipping.hpp"

#include <privdiff/plugin/export.hpp>

namespace {
void register_components(privdiff::sdk::Registrar* registrar) {
  registrar->add<automatic_clipping::AutomaticClipping>(
      "automatic_clipping", "DP-SGD with automatic clipping: each gradient scaled by R / (||g|| + gamma)",
      automatic_clipping::schema());
}
}  // namespace

PRIVDIFF_PLUGIN("automatic_clipping", "0.1.0", "Automatic clipping (Bu et al., NeurIPS 2023)", register_components)
