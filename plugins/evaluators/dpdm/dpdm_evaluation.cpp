// dpdm_evaluation: DPDM's evaluation protocol as two evaluators — dpdm_classifiers (downstream
// accuracy of logreg, MLP, CNN) and feature_cnn (Fréchet distance, precision/recall on the CNN's
// features).
#include "dpdm_evaluators.hpp"

#include <privdiff/plugin/export.hpp>

namespace {
void register_components(privdiff::sdk::Registrar* registrar) {
  privdiff::plugins::dpdm_evaluation::register_dpdm_classifiers(registrar);
  privdiff::plugins::dpdm_evaluation::register_feature_cnn(registrar);
}
}  // namespace

PRIVDIFF_PLUGIN("dpdm_evaluation", "0.1.0", "DPDM's evaluation: downstream classifiers and CNN-feature fidelity",
                register_components)
